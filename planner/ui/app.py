"""The web application of ``planner ui``: pages, JSON endpoints and downloads (Starlette).

Pages: ``/`` the plan of the open problem (what-if controls, the new plan beside the base),
``/problem`` open, paste or upload a problem, ``/frontier`` the serving frontier chart.
Endpoints: ``POST /api/problem`` ({text} or {path}), ``POST /api/whatif`` ({changes}),
``GET /api/jobs/{id}`` (a solve's progress), ``GET /api/frontier`` (chart data),
``GET /jobs/{id}/plan.json`` and ``/jobs/{id}/plan.xlsx`` (downloads),
``GET /jobs/{id}/compare`` (the side-by-side fragment).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.templating import Jinja2Templates

from planner.base.errors import InputError, PlannerError
from planner.inputs.keys import Base
from planner.ui import safety, views
from planner.ui.jobs import Job, Runner, error_lines

HERE = Path(__file__).parent
TEMPLATES = Jinja2Templates(directory=str(HERE / "templates"))
REFERENCE = Path("problems/2m_budget.yaml")

# The what-if controls: (alias of `planner whatif --vary` / `planner solve --set`, label,
# where the problem file holds its current value).
CONTROLS = (
    ("utilization", "Utilization (share of the day's peak, every service)", ("serve", "traffic", "utilization")),
    ("growth", "Traffic growth per month (every service)", ("serve", "traffic", "growth_per_month")),
    ("power_price", "Power price ($/kWh)", ("site", "power_usd_per_kwh")),
    ("discount_rate", "Discount rate (a year)", ("finance", "discount_rate")),
    ("capex_budget", "Capex budget ($)", ("budget", "capex_usd")),
)  # fmt: skip


@dataclass
class State:
    """The server's state: its folder, solver, the open problem and its base plan's job."""

    workdir: Path
    runner: Runner
    time_limit: float | None = None  # the server's cap on every solve (None: the problem's)
    base: Base | None = None
    text: str = ""
    name: str = ""
    base_job: int | None = None
    whatifs: list[int] = field(default_factory=list)


def _limit(state: State, inputs: Any) -> float:
    own = float(inputs.problem.solver.time_limit_s)
    return min(own, state.time_limit) if state.time_limit else own


def open_problem(state: State, text: str, name: str) -> Job:
    """Validate ``text`` as the CLI does, make it the open problem and queue its plan."""
    from planner.base.yamlio import parse_yaml_text
    from planner.inputs.problem import load_problem_text

    safety.check_upload(len(text.encode("utf-8")))
    inputs = load_problem_text(text, name, base_dir=state.workdir.resolve())
    doc = parse_yaml_text(text, Path(name))
    job = state.runner.submit(inputs, name, _limit(state, inputs))
    state.base = Base(doc.data, name, str(state.workdir.resolve()), doc.lines)
    state.text, state.name, state.base_job, state.whatifs = text, name, job.id, []
    return job


def current_values(base: Base | None) -> dict[str, Any]:
    """Each control's value in the open problem (the first service's for per-service ones)."""
    if base is None:
        return {}
    data, out = base.data, {}
    for key, _label, (head, *path) in CONTROLS:
        if head == "serve":
            serve = (data.get("workloads") or {}).get("serve") or []
            cur: Any = serve[0] if serve and isinstance(serve[0], dict) else None
        else:
            cur = data.get(head)
        for part in path:
            cur = cur.get(part) if isinstance(cur, dict) else None
        out[key] = cur
    return out


def _error(exc: PlannerError, status: int = 400) -> JSONResponse:
    return JSONResponse({"error": error_lines(exc), "exit_code": int(exc.exit_code)}, status)


async def _json_body(request: Request) -> dict[str, Any]:
    """The request's JSON object, refused over the upload limit before it is parsed."""
    declared = int(request.headers.get("content-length") or 0)
    safety.check_upload(max(0, declared - 1024))  # the JSON's own keys and quotes
    body = await request.body()
    safety.check_upload(max(0, len(body) - 1024))
    try:
        data = json.loads(body or b"{}")
    except ValueError as exc:
        raise InputError(f"the request is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise InputError("the request must be a JSON object")
    return data


def _job(state: State, job_id: int) -> Job:
    job = state.runner.jobs.get(job_id)
    if job is None:
        raise InputError(f"no plan number {job_id} on this server (it may have been dropped)")
    return job


def _progress(job: Job) -> dict[str, Any]:
    out = job.progress()
    if job.plan is not None:
        t = job.plan.totals
        out.update(npv_usd=t.npv_usd, total_usd=t.total_usd, gap=job.plan.gap,
                   status=job.plan.status)  # fmt: skip
    return out


# ------------------------------------------------------------------ pages


def page_plan(request: Request) -> Response:
    state: State = request.app.state.planner
    job = state.runner.jobs.get(state.base_job) if state.base_job else None
    ctx = {
        "request": request,
        "tab": "plan",
        "job": job,
        "view": views.plan_view(job.plan) if job and job.plan else None,
        "controls": [(k, label, current_values(state.base).get(k)) for k, label, _ in CONTROLS],
        "problem": state.name,
    }
    return TEMPLATES.TemplateResponse(request, "plan.html", ctx)


def page_problem(request: Request) -> Response:
    state: State = request.app.state.planner
    ctx = {
        "request": request,
        "tab": "problem",
        "files": safety.problem_files(state.workdir),
        "text": state.text,
        "problem": state.name,
        "limit": safety.MAX_UPLOAD_BYTES,
    }
    return TEMPLATES.TemplateResponse(request, "problem.html", ctx)


def page_frontier(request: Request) -> Response:
    ctx = {"request": request, "tab": "frontier", "defaults": FRONTIER_DEFAULTS}
    return TEMPLATES.TemplateResponse(request, "frontier.html", ctx)


def fragment_compare(request: Request) -> Response:
    state: State = request.app.state.planner
    try:
        new = _job(state, int(request.path_params["job_id"]))
        base = _job(state, new.base_id) if new.base_id else None
    except InputError as exc:
        return _error(exc, 404)
    ctx: dict[str, Any] = {"request": request, "new": new, "base": base}
    if new.plan is not None and base is not None and base.plan is not None:
        ctx.update(
            diff=views.compare_view(base.plan, new.plan),
            base_view=views.plan_view(base.plan),
            new_view=views.plan_view(new.plan),
        )
    return TEMPLATES.TemplateResponse(request, "_compare.html", ctx)


# ------------------------------------------------------------------ endpoints


async def api_problem(request: Request) -> Response:
    state: State = request.app.state.planner
    try:
        body = await _json_body(request)
        if "path" in body:
            text, name = safety.read_problem_file(state.workdir, str(body["path"]))
        else:
            text, name = str(body.get("text") or ""), str(body.get("name") or "pasted.yaml")
            name = Path(name).name or "pasted.yaml"
        job = open_problem(state, text, name)
    except PlannerError as exc:
        status = 403 if isinstance(exc, safety.OutsideFolderError) else 400
        if "bytes; a problem file may be at most" in str(exc):
            status = 413
        return _error(exc, status)
    return JSONResponse(_progress(job))


async def api_whatif(request: Request) -> Response:
    from planner.analysis.sweep import changed_inputs

    state: State = request.app.state.planner
    if state.base is None or state.base_job is None:
        return JSONResponse({"error": ["error: open a problem first"]}, 400)
    try:
        body = await _json_body(request)
        changes = body.get("changes") or {}
        if not isinstance(changes, dict) or not changes:
            raise InputError("no change: set at least one value")
        allowed = {k for k, _, _ in CONTROLS}
        sets = []
        for key, value in changes.items():
            if key not in allowed:
                raise InputError(
                    f"{key}: not a what-if control; one of {', '.join(sorted(allowed))}"
                )
            sets.append(f"{key}={str(value).strip()}")
        inputs = changed_inputs(state.base, sets)
        label = f"{state.name} [{', '.join(sets)}]"
        job = state.runner.submit(inputs, label, _limit(state, inputs), sets, state.base_job)
    except PlannerError as exc:
        return _error(exc)
    state.whatifs.append(job.id)
    return JSONResponse(_progress(job))


def api_job(request: Request) -> Response:
    state: State = request.app.state.planner
    try:
        return JSONResponse(_progress(_job(state, int(request.path_params["job_id"]))))
    except InputError as exc:
        return _error(exc, 404)


def _finished(request: Request) -> Job:
    job = _job(request.app.state.planner, int(request.path_params["job_id"]))
    if job.plan is None:
        raise InputError(f"plan {job.id} is {job.state}: nothing to download yet")
    return job


def download_json(request: Request) -> Response:
    try:
        job = _finished(request)
    except InputError as exc:
        return _error(exc, 404)
    headers = {"content-disposition": f'attachment; filename="plan-{job.id}.json"'}
    return Response(job.plan.to_json(), media_type="application/json", headers=headers)


def download_xlsx(request: Request) -> Response:
    from planner.reports.excel import write_workbook

    state: State = request.app.state.planner
    try:
        job = _finished(request)
    except InputError as exc:
        return _error(exc, 404)
    out = safety.output_path(state.workdir, f"ui-plan-{job.id}.xlsx")
    if not out.exists():
        write_workbook(job.plan, out)
    return FileResponse(out, filename=out.name)


# ------------------------------------------------------------------ the frontier

FRONTIER_DEFAULTS = {
    "model": "deepseek-r1",
    "gpus": "b200,gb200,mi355x",
    "precision": "fp4,fp8",
    "prompt": 2000,
    "output": 1500,
}


@functools.lru_cache(maxsize=32)
def frontier_data(model_id: str, gpu_ids: str, precision: str, prompt: int, output: int) -> str:
    """``estimate frontier``'s fronts for these arguments as the chart's JSON (cached)."""
    from planner.analysis.frontier import OwnedTerms, frontiers
    from planner.base.yamlio import did_you_mean
    from planner.inputs.catalog import CATALOG_DIR, load_gpus, load_models, load_offers

    models, gpus = load_models(CATALOG_DIR / "models.yaml"), load_gpus(CATALOG_DIR / "gpus.yaml")
    if model_id not in models:
        raise InputError(f"unknown model {model_id!r}; " + did_you_mean(model_id, models.keys()))
    ids = [g.strip() for g in gpu_ids.split(",") if g.strip()]
    for gid in ids:
        if gid not in gpus:
            raise InputError(f"unknown gpu {gid!r}; " + did_you_mean(gid, gpus.keys()))
    if not ids or not 1 <= prompt <= 10_000_000 or not 1 <= output <= 10_000_000:
        raise InputError("give at least one GPU, and prompt and output tokens from 1 to 10M")
    wanted = [p.strip().lower() for p in precision.split(",") if p.strip()]
    offers = list(load_offers(CATALOG_DIR / "offers.yaml").values())
    fronts = frontiers(models[model_id], [gpus[g] for g in ids], wanted, prompt, output,
                       OwnedTerms.defaults(), offers)  # fmt: skip
    title = f"{model_id}, {prompt} in / {output} out"
    fig = views.frontier_figure(fronts, title)
    fig["cannot"] = [f"{g}: {'; '.join(f.reasons[:2])}" for g, f in fronts.items() if not f.serves]
    return json.dumps(fig, allow_nan=False, default=lambda x: None)


def api_frontier(request: Request) -> Response:
    q = {**FRONTIER_DEFAULTS, **dict(request.query_params)}
    try:
        text = frontier_data(str(q["model"]), str(q["gpus"]), str(q["precision"]),
                             int(q["prompt"]), int(q["output"]))  # fmt: skip
    except ValueError:
        return JSONResponse(
            {"error": ["error: prompt and output are whole numbers of tokens"]}, 400
        )
    except PlannerError as exc:
        return _error(exc)
    return Response(text, media_type="application/json")


def plotly_js(_request: Request) -> Response:
    """Plotly's JavaScript, from inside the ``plotly`` Python package (no CDN)."""
    import plotly

    path = Path(plotly.__file__).parent / "package_data" / "plotly.min.js"
    return FileResponse(path, media_type="text/javascript",
                        headers={"cache-control": "max-age=86400"})  # fmt: skip


def create_app(
    workdir: Path, problem: Path | None = None, time_limit: float | None = None
) -> Starlette:
    """The application for ``workdir``, with ``problem`` (any path the user gave the command;
    the page itself opens files inside ``workdir`` only) opened and its plan queued. A problem
    that does not load raises its InputError before any page is served."""
    state = State(workdir=workdir.resolve(), runner=Runner(), time_limit=time_limit)
    if problem is not None:
        open_problem(state, *read_given(state.workdir, problem))
    app = Starlette(routes=ROUTES)
    app.state.planner = state
    return app


def read_given(workdir: Path, problem: Path) -> tuple[str, str]:
    """(text, name) of the problem the command was given: named by its path inside the
    working folder, or by its file name where it lies outside."""
    from planner.base.files import read_bytes

    data = read_bytes(problem, "problem file", safety.MAX_UPLOAD_BYTES)
    path = problem.resolve()
    name = str(path.relative_to(workdir)) if path.is_relative_to(workdir) else path.name
    return data.decode("utf-8", errors="replace"), name


ROUTES = [
    Route("/", page_plan),
    Route("/problem", page_problem),
    Route("/frontier", page_frontier),
    Route("/api/problem", api_problem, methods=["POST"]),
    Route("/api/whatif", api_whatif, methods=["POST"]),
    Route("/api/jobs/{job_id:int}", api_job),
    Route("/api/frontier", api_frontier),
    Route("/jobs/{job_id:int}/compare", fragment_compare),
    Route("/jobs/{job_id:int}/plan.json", download_json),
    Route("/jobs/{job_id:int}/plan.xlsx", download_xlsx),
    Route("/static/plotly.min.js", plotly_js),
    Route("/favicon.ico", lambda _request: Response(status_code=204)),
    Mount("/static", StaticFiles(directory=str(HERE / "static")), name="static"),
]


def free_port(host: str) -> int:
    """A port free on ``host`` now (for tests and ``--port 0``)."""
    import socket

    with socket.socket() as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])
