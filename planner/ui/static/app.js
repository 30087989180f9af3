// The planner's page: charts from data attributes, polling of background solves, the
// what-if form, opening/pasting problems and the frontier chart. No network beyond this server.
"use strict";

function drawCharts(root) {
  (root || document).querySelectorAll("[data-figure]").forEach(function (el) {
    if (el.dataset.drawn) return;
    var fig = JSON.parse(el.dataset.figure);
    Plotly.newPlot(el, fig.data, fig.layout, {responsive: true, displaylogo: false});
    el.dataset.drawn = "1";
  });
}

function poll(jobId, onProgress, onDone) {
  fetch("/api/jobs/" + jobId).then(function (r) { return r.json(); }).then(function (p) {
    if (p.state === "done" || p.state === "failed") { onDone(p); return; }
    onProgress(p);
    setTimeout(function () { poll(jobId, onProgress, onDone); }, 400);
  });
}

function postJSON(url, body) {
  return fetch(url, {method: "POST", headers: {"content-type": "application/json"},
                     body: JSON.stringify(body)})
    .then(function (r) { return r.json().then(function (j) { j.httpStatus = r.status; return j; }); });
}

function progressText(p) {
  return (p.state === "queued" ? "waiting for the solver" : "solving") +
    ": " + p.elapsed_s.toFixed(0) + " s of at most " + p.time_limit_s.toFixed(0) + " s";
}

function watchBasePlan() {
  var box = document.querySelector(".progress[data-job]");
  if (!box) return;
  poll(box.dataset.job, function (p) {
    box.querySelector("progress").value = p.share;
    box.querySelector(".elapsed").textContent = progressText(p);
  }, function () { window.location.reload(); });
}

function whatIfForm() {
  var form = document.getElementById("whatif");
  if (!form) return;
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    var changes = {};
    form.querySelectorAll("input[name]").forEach(function (inp) {
      var v = inp.value.trim();
      if (v !== "" && v !== inp.dataset.current) changes[inp.name] = v;
    });
    var status = document.getElementById("wi-status");
    var out = document.getElementById("compare");
    if (!Object.keys(changes).length) { status.textContent = "change a value first"; return; }
    status.textContent = "queued...";
    postJSON("/api/whatif", {changes: changes}).then(function (j) {
      if (j.httpStatus >= 400) { status.textContent = ""; out.innerHTML = ""; showError(out, j.error); return; }
      poll(j.id, function (p) { status.textContent = progressText(p); }, function (p) {
        status.textContent = p.state === "done" ? "done in " + p.elapsed_s.toFixed(1) + " s" : "no plan";
        fetch("/jobs/" + j.id + "/compare").then(function (r) { return r.text(); }).then(function (html) {
          out.innerHTML = html;
          document.getElementById("base-plan").hidden = p.state === "done";
          drawCharts(out);
        });
      });
    });
  });
}

function showError(el, lines) {
  var box = document.createElement("div");
  box.className = "error";
  var pre = document.createElement("pre");
  pre.textContent = lines.join("\n");
  box.appendChild(pre);
  el.appendChild(box);
}

function problemPage() {
  var form = document.getElementById("paste");
  if (!form) return;
  var err = document.getElementById("problem-error");
  function submit(body) {
    err.hidden = true;
    postJSON("/api/problem", body).then(function (j) {
      if (j.httpStatus >= 400) { err.querySelector("pre").textContent = j.error.join("\n"); err.hidden = false; return; }
      window.location.href = "/";
    });
  }
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    submit({text: document.getElementById("problem-text").value, name: "pasted.yaml"});
  });
  document.querySelectorAll(".open-file").forEach(function (a) {
    a.addEventListener("click", function (ev) { ev.preventDefault(); submit({path: a.dataset.path}); });
  });
  document.getElementById("upload").addEventListener("change", function (ev) {
    var f = ev.target.files[0];
    if (!f) return;
    f.text().then(function (t) {
      document.getElementById("problem-text").value = t;
      submit({text: t, name: f.name});
    });
  });
}

function frontierPage() {
  var form = document.getElementById("frontier-form");
  if (!form) return;
  function draw() {
    var q = new URLSearchParams(new FormData(form)).toString();
    var status = document.getElementById("frontier-status");
    var err = document.getElementById("frontier-error");
    status.textContent = "computing...";
    err.hidden = true;
    fetch("/api/frontier?" + q).then(function (r) { return r.json(); }).then(function (fig) {
      if (!fig.error) fig.error = null;
      status.textContent = "";
      if (fig.error) { err.querySelector("pre").textContent = fig.error.join("\n"); err.hidden = false; return; }
      Plotly.react("frontier-chart", fig.data, fig.layout, {responsive: true, displaylogo: false});
      var ul = document.getElementById("frontier-cannot");
      ul.innerHTML = "";
      fig.cannot.forEach(function (c) { var li = document.createElement("li"); li.textContent = "cannot serve: " + c; ul.appendChild(li); });
      document.getElementById("frontier-chart").dataset.traces = fig.data.length;
    });
  }
  form.addEventListener("submit", function (ev) { ev.preventDefault(); draw(); });
  draw();
}

document.addEventListener("DOMContentLoaded", function () {
  drawCharts();
  watchBasePlan();
  whatIfForm();
  problemPage();
  frontierPage();
});
