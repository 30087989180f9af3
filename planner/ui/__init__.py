"""``planner ui``: a local web page to look at a plan, change an assumption and see the new
plan beside the old one, and chart the serving frontier (issue 54).

The last stage before the CLI: it reads problems the way the CLI does
(:mod:`planner.inputs`), plans them through the library (:func:`planner.plan.make.plan_problem`,
verified by :mod:`planner.verify`), and shows them with the report layer's sentences
(:mod:`planner.reports.plan_facts`). It never imports the solver's modelling layer.

* :mod:`planner.ui.views` -- pure functions: a plan (or two) as the data a page shows.
* :mod:`planner.ui.jobs` -- one solve at a time, in the background, each under a time limit.
* :mod:`planner.ui.safety` -- the working folder, upload limits and paths the page may read.
* :mod:`planner.ui.app` -- the Starlette application: pages, JSON endpoints, downloads.

Libraries (the ``ui`` extra, docs/guides/web-ui.md says why): Starlette (ASGI, with Jinja2
templates) served by uvicorn, and Plotly's JavaScript, which ships inside the ``plotly``
Python package and is served from it: no CDN, the page works offline.
"""
