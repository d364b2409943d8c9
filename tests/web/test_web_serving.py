"""Serving under load: work by kind in bounded pools (429 when full, 503 past the deadline), new
index generations picked up while serving, the API key, /metrics and the access log."""

from __future__ import annotations

import json
import logging
import shutil
import threading
import time

import pytest
from fastapi.testclient import TestClient


def _blocking_maps(st):
    """Make the attention view's model call wait for ``release`` (and say when it started)."""
    started, release = threading.Semaphore(0), threading.Event()
    real = st.maps

    def slow(text):
        started.release()
        release.wait(20)
        return real(text)

    st.maps = slow
    return started, release


def _post_in_thread(c, path, body, out: list):
    th = threading.Thread(target=lambda: out.append(c.post(path, json=body)))
    th.start()
    return th


def test_searches_do_not_wait_behind_attention_work(encoder, sample_index):
    """The attention pool is busy (one job running, two waiting): searches still answer at once."""
    from qkv.web import create_app

    app = create_app(encoder=encoder, index_dir=sample_index, pools={"attention": {"threads": 1, "queue": 4}})
    with TestClient(app) as c:
        st = app.state.qkv
        started, release = _blocking_maps(st)
        out: list = []
        threads = [_post_in_thread(c, "/api/attention", {"text": f"slow {i}"}, out) for i in range(3)]
        try:
            assert started.acquire(timeout=20)
            deadline = time.time() + 5
            while st.pools["attention"].pending < 3 and time.time() < deadline:
                time.sleep(0.01)
            assert st.pools["attention"].pending == 3
            # with one shared lock these would wait for the release, which comes only after them: they
            # are asked in a thread, and must all have answered while the attention work is held
            searched: list = []
            asker = threading.Thread(target=lambda: searched.extend(
                c.post("/api/search", json={"query": q, "k": 3}) for q in ("boots", "kettle", "silk scarf")))
            asker.start()
            asker.join(120)  # a guard against a hang, not a time bound
            assert not asker.is_alive(), "the searches waited behind the attention work"
            assert [r.status_code for r in searched] == [200, 200, 200]
            assert not out and st.pools["attention"].pending == 3  # the attention requests are still held
        finally:
            release.set()
            for th in threads:
                th.join(30)
        assert [r.status_code for r in out] == [200, 200, 200]


def test_a_full_queue_is_429_with_retry_after(encoder, sample_index):
    from qkv.web import create_app

    app = create_app(encoder=encoder, index_dir=sample_index, pools={"attention": {"threads": 1, "queue": 1}})
    with TestClient(app) as c:
        st = app.state.qkv
        started, release = _blocking_maps(st)
        out: list = []
        threads = [_post_in_thread(c, "/api/attention", {"text": "one"}, out)]
        try:
            assert started.acquire(timeout=20)
            threads.append(_post_in_thread(c, "/api/attention", {"text": "two"}, out))  # waits in the queue
            deadline = time.time() + 5
            while st.pools["attention"].pending < 2 and time.time() < deadline:
                time.sleep(0.01)
            r = c.post("/api/attention", json={"text": "three"})
            assert r.status_code == 429, r.text
            assert int(r.headers["retry-after"]) >= 1
            assert "busy" in r.json()["error"] and r.json()["retry_after"] == int(r.headers["retry-after"])
            # another kind is not affected
            assert c.post("/api/search", json={"query": "boots", "k": 2}).status_code == 200
        finally:
            release.set()
            for th in threads:
                th.join(30)
        assert sorted(r.status_code for r in out) == [200, 200]
        assert st.pools["attention"].pending == 0


def test_past_the_deadline_is_503_and_the_waiting_job_never_runs(encoder, sample_index):
    from qkv.web import create_app

    app = create_app(encoder=encoder, index_dir=sample_index,
                     pools={"attention": {"threads": 1, "queue": 4, "deadline": 0.5}})
    with TestClient(app) as c:
        st = app.state.qkv
        started, release = _blocking_maps(st)
        out: list = []
        th = _post_in_thread(c, "/api/attention", {"text": "held"}, out)
        try:
            assert started.acquire(timeout=20)
            queued: list = []
            asker = _post_in_thread(c, "/api/attention", {"text": "queued behind it"}, queued)
            asker.join(120)  # answered at its deadline while the held job still runs (a hang guard only)
            assert queued and not release.is_set(), "the queued request waited for the held one"
            r = queued[0]
            assert r.status_code == 503, r.text
            assert "deadline" in r.json()["error"] and int(r.headers["retry-after"]) >= 1
            th.join(10)
            assert out[0].status_code == 503  # the running one, too, was answered at its deadline
        finally:
            release.set()
            th.join(30)
        time.sleep(0.3)
        assert not started.acquire(timeout=0.5)  # the queued job was dropped, not run late
        assert st.pools["attention"].pending == 0


@pytest.fixture
def served_copy(sample_index, tmp_path):
    """A copy of the sample index this test may write to."""
    path = tmp_path / "index"
    shutil.copytree(sample_index, path, ignore=shutil.ignore_patterns(".lock"))
    return path


def test_a_new_generation_is_served_without_a_failed_request(encoder, served_copy, tmp_path):
    """`qkv index --upsert` on the served directory while searches run: every search answers 200,
    the new products are found once published (the server polls every 0.1 s), and later answers
    name the new generation."""
    from qkv.search import build_index
    from qkv.web import create_app

    app = create_app(encoder=encoder, index_dir=served_copy, generation_poll=0.1)
    new = tmp_path / "new.csv"
    new.write_text("id,title,price\n" + "".join(f"ZX{i},Zorblax quantum teapot model {i},{10 + i}\n" for i in range(20)),
                   encoding="utf-8")
    statuses: list[int] = []
    stop = threading.Event()
    with TestClient(app) as c:
        before = c.post("/api/search", json={"query": "zorblax teapot", "k": 3, "mode": "keyword"}).json()
        assert before["count"] == 0
        gen0 = before["generation"]

        def searching():
            while not stop.is_set():
                statuses.append(c.post("/api/search", json={"query": "running shoes", "k": 5}).status_code)

        workers = [threading.Thread(target=searching) for _ in range(3)]
        for w in workers:
            w.start()
        try:
            build_index(new, served_copy, encoder, upsert=True)
            published = time.perf_counter()
            found = None
            while time.perf_counter() - published < 120:  # a guard against a hang, not a time bound
                r = c.post("/api/search", json={"query": "zorblax teapot", "k": 3, "mode": "keyword"})
                statuses.append(r.status_code)
                if r.json().get("count"):
                    found = time.perf_counter() - published
                    break
                time.sleep(0.05)
        finally:
            stop.set()
            for w in workers:
                w.join(30)
        assert found is not None, "the new generation was never served"
        after = c.post("/api/search", json={"query": "zorblax teapot model 7", "k": 1}).json()
        assert after["generation"] != gen0 and after["results"][0]["id"].startswith("ZX")
        assert c.get("/api/search/fields").json()["count"] == 276 + 20  # described anew for the new generation
        assert statuses and set(statuses) == {200}, {s: statuses.count(s) for s in set(statuses)}
        assert app.state.qkv.generation_swaps == 1
        metrics = c.get("/metrics").text
        assert "qkv_index_generation_swaps_total 1.0" in metrics


KEY = "k3y-for-the-tests-0123456789"


@pytest.fixture(scope="module")
def keyed(encoder, sample_index):
    from qkv.web import create_app

    with TestClient(create_app(encoder=encoder, index_dir=sample_index, api_key=KEY), raise_server_exceptions=False) as c:
        yield c


@pytest.mark.parametrize("headers, status, words", [
    ({}, 401, "needs an API key"),
    ({"authorization": "Bearer wrong-key"}, 401, "wrong"),
    ({"x-api-key": KEY[:-1]}, 401, "wrong"),
    ({"authorization": f"Bearer {KEY}"}, 200, None),
    ({"x-api-key": KEY}, 200, None),
])
def test_the_api_key_is_required_and_checked(keyed, headers, status, words):
    for method, path, body in (("get", "/api/health", None), ("post", "/api/search", {"query": "boots", "k": 1}),
                               ("get", "/metrics", None)):
        r = getattr(keyed, method)(path, headers=headers, **({"json": body} if body else {}))
        assert r.status_code == status, (path, r.text)
        if words:
            assert words in r.json()["error"] and r.headers["www-authenticate"].startswith("Bearer")


def test_the_page_itself_needs_no_key(keyed):
    assert keyed.get("/").status_code == 200
    assert keyed.get("/static/app.js").status_code == 200


def test_the_key_is_compared_in_constant_time(encoder, monkeypatch):
    """Every key a request carries is checked by hmac.compare_digest (time independent of where
    it differs), never by ==: a right key, a wrong one of the same length, a prefix, a longer one."""
    import hmac

    from qkv.web import create_app, observe

    seen = []
    constant_time = hmac.compare_digest

    def recording(a, b):
        seen.append((bytes(a), bytes(b)))
        return constant_time(a, b)

    monkeypatch.setattr(observe.hmac, "compare_digest", recording)
    key = "k" * 20
    with TestClient(create_app(encoder=encoder, api_key=key)) as c:
        given = [key, "x" * 20, key[:10], key + "x"]
        codes = [c.get("/api/health", headers={"X-API-Key": g}).status_code for g in given]
    assert codes == [200, 401, 401, 401]
    assert seen == [(g.encode(), key.encode()) for g in given]


def test_metrics_parse_as_prometheus_text(client):
    from prometheus_client.parser import text_string_to_metric_families

    assert client.post("/api/search", json={"query": "boots", "k": 2}).status_code == 200
    assert client.post("/api/attention", json={"text": "red shoes"}).status_code == 200
    assert client.post("/api/search", json={"query": ""}).status_code == 422
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(r.text)}
    for name in ("qkv_requests", "qkv_request_seconds", "qkv_queue_depth", "qkv_jobs_running",
                 "qkv_index_generation", "qkv_model_info"):
        assert name in families, sorted(families)
    req = {(s.labels["kind"], s.labels["status"]): s.value for s in families["qkv_requests"].samples
           if s.name == "qkv_requests_total"}
    assert req[("search", "200")] >= 1 and req[("search", "422")] >= 1 and req[("attention", "200")] >= 1
    counts = {s.labels["kind"]: s.value for s in families["qkv_request_seconds"].samples
              if s.name == "qkv_request_seconds_count"}
    assert counts["search"] >= 2 and counts["attention"] >= 1
    depth = {s.labels["kind"]: s.value for s in families["qkv_queue_depth"].samples}
    assert depth.get("search") == 0
    gen = [s.value for s in families["qkv_index_generation"].samples]
    assert gen and gen[0] >= 0
    model = families["qkv_model_info"].samples[0]
    assert model.labels["model"].endswith("all-MiniLM-L6-v2") and model.value == 1


def test_one_access_log_line_per_request(client, caplog):
    log = logging.getLogger("qkv.web.access")
    # `qkv serve` (the CLI tests) may have stopped it propagating: caught here directly, and only
    # here (run alone, it would reach caplog's handler twice: directly and through the root)
    log.addHandler(caplog.handler)
    propagate, log.propagate = log.propagate, False
    try:
        with caplog.at_level(logging.INFO, logger="qkv.web.access"):
            client.post("/api/search", json={"query": "boots", "k": 2})
            client.post("/api/search", json={"query": "boots", "where": "x"})
    finally:
        log.removeHandler(caplog.handler)
        log.propagate = propagate
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "qkv.web.access"]
    assert [(x["path"], x["status"], x["kind"]) for x in lines] == [("/api/search", 200, "search"),
                                                                    ("/api/search", 422, "search")]
    assert all(x["ms"] > 0 and x["bytes"] > 0 and x["method"] == "POST" and x["pid"] for x in lines)


def test_heavy_kinds_in_child_processes_answer_as_in_threads(encoder, sample_index, sample_attributes, client):
    """`qkv serve` runs attention views, summaries and attributes in child processes (own model,
    lower priority): the answers are those of the in-thread app, errors keep their status."""
    import os

    from qkv.web import create_app

    body = {"text": "waterproof hiking boots", "layer": 2, "head": 5}
    reviews = {"reviews": ["Light and comfortable.", "Runs small, order a size up.", "Fell apart in a month."],
               "budget": 12}
    app = create_app(encoder=encoder, index_dir=sample_index, attributes_model=sample_attributes, child_processes=True)
    with TestClient(app, raise_server_exceptions=False) as c:
        pools = app.state.qkv.pools
        assert pools["attention"].in_process and pools["summary"].in_process and not pools["search"].in_process
        got = c.post("/api/attention", json=body)
        assert got.status_code == 200, got.text
        assert got.json() == client.post("/api/attention", json=body).json()
        s = c.post("/api/summarize", json=reviews)
        assert s.status_code == 200 and s.json() == client.post("/api/summarize", json=reviews).json()
        bad = c.post("/api/neuron", json={"text": "short", "query": 40})
        assert bad.status_code == 422 and "out of range" in bad.json()["error"]
        child_pids = {p.pid for p in pools.children.executor._processes.values()}
        assert child_pids and os.getpid() not in child_pids
        if sample_attributes is not None:
            a = {"titles": ["Northpeak Waterproof Hiking Boots - Black, US 9"]}
            r = c.post("/api/attributes", json=a).json()
            want = client.post("/api/attributes", json=a).json()
            assert r["results"] == want["results"]


def test_two_workers_share_the_port_and_the_metrics(sample_index, tmp_path):
    """`qkv serve --workers 2`: connections spread over both processes (SO_REUSEPORT), /metrics
    sums them, and SIGTERM stops everything."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    from pathlib import Path

    import httpx

    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    root = Path(__file__).resolve().parents[2]
    log = tmp_path / "server.log"
    proc = subprocess.Popen([sys.executable, "-c", "from qkv.cli import main; main()", "serve", "--index", str(sample_index),
                             "--port", str(port), "--workers", "2"], cwd=root, stdout=open(log, "w"), stderr=subprocess.STDOUT,
                            env={**os.environ, "PYTHONPATH": str(root), "HF_HUB_OFFLINE": "1"})
    try:
        base = f"http://127.0.0.1:{port}"
        deadline = time.time() + 180
        while time.time() < deadline:
            assert proc.poll() is None, log.read_text()
            try:
                if httpx.get(base + "/api/health", timeout=5).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.5)
        for i in range(40):  # a new connection each time: the kernel spreads them
            assert httpx.post(base + "/api/search", json={"query": f"boots {i}", "k": 1}, timeout=30).status_code == 200
        pids = {json.loads(line)["pid"] for line in log.read_text().splitlines() if line.startswith('{"ts"')}
        assert len(pids) == 2, pids
        from prometheus_client.parser import text_string_to_metric_families

        fam = {f.name: f for f in text_string_to_metric_families(httpx.get(base + "/metrics", timeout=10).text)}
        assert {s.labels["pid"] for s in fam["qkv_index_generation"].samples} == {str(p) for p in pids}
        total = sum(s.value for s in fam["qkv_requests"].samples
                    if s.name == "qkv_requests_total" and s.labels["kind"] == "search")
        assert total == 40
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()
            raise
    assert proc.returncode is not None


def test_a_pool_child_exits_when_its_server_dies(tmp_path):
    """A heavy-kind child process whose server was killed does not linger with a model in memory."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    code = (
        "import multiprocessing as mp, os, sys, time\n"
        "from qkv.web.pools import _exit_with_parent\n"
        "def child(parent):\n"
        "    _exit_with_parent(parent); time.sleep(120)\n"
        "if __name__ == '__main__':\n"
        "    p = mp.get_context('spawn').Process(target=child, args=(os.getpid(),)); p.start()\n"
        "    print(p.pid, flush=True); time.sleep(0.5); os._exit(0)\n")
    script = tmp_path / "parent.py"
    script.write_text(code)
    proc = subprocess.Popen([sys.executable, str(script)], stdout=subprocess.PIPE, text=True, cwd=tmp_path,
                            env={**os.environ, "PYTHONPATH": str(root)})
    pid = int(proc.stdout.readline())
    proc.wait(30)
    proc.stdout.close()
    deadline = time.time() + 10
    while time.time() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return
        time.sleep(0.2)
    os.kill(pid, 9)
    pytest.fail("the child outlived its parent by 10 s")
