"""Fixtures of the web tests: an API client over the shared encoder, a live uvicorn server on a free
loopback port, and headless Chromium (Debian's package, driven by Playwright)."""

from __future__ import annotations

import os
import shutil
import socket
import threading
import time
from pathlib import Path

import pytest

CHROMIUM = os.environ.get("QKV_CHROMIUM", "/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts"


def pytest_configure(config):
    config.addinivalue_line("markers", "browser: drives headless Chromium (needs /usr/bin/chromium and playwright)")


@pytest.fixture(scope="session")
def sample_index(encoder, tmp_path_factory):
    """The sample catalog's index (qkv/data/sample_catalog.csv, written by the project), built once."""
    from qkv.web.sample import ensure_sample_index

    return ensure_sample_index(tmp_path_factory.mktemp("sample-index"), encoder=encoder)


@pytest.fixture(scope="session")
def sample_attributes(encoder, tmp_path_factory):
    """A small attribute model trained on the first 40 sample titles (15 iterations: quick); None
    when qkv.attributes is missing, so the other views' tests still run (the attributes tests then
    fail, saying so)."""
    from qkv.web.sample import ensure_sample_attribute_model

    try:
        import qkv.attributes  # noqa: F401
    except ImportError:
        return None
    return ensure_sample_attribute_model(tmp_path_factory.mktemp("sample-attributes"), encoder=encoder,
                                         limit=40, max_iter=15)


@pytest.fixture(scope="session")
def app(encoder, sample_index, sample_attributes):
    from qkv.web import create_app

    return create_app(encoder=encoder, index_dir=sample_index, attributes_model=sample_attributes)


@pytest.fixture(scope="session")
def client(app):
    from fastapi.testclient import TestClient

    with TestClient(app, raise_server_exceptions=False) as c:
        yield c


def _serve(app):
    """uvicorn serving ``app`` on a free 127.0.0.1 port in a thread; yields the base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.time() + 120
    while not server.started:
        if time.time() > deadline or not thread.is_alive():
            pytest.fail("the test server did not start within 120 s")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(timeout=10)


@pytest.fixture()
def serve():
    """``serve(app)`` → the base URL of ``app`` served on a free loopback port (stopped after the test)."""
    running = []

    def start(app) -> str:
        gen = _serve(app)
        running.append(gen)
        return next(gen)

    yield start
    for gen in running:
        next(gen, None)


@pytest.fixture(scope="session")
def live_server(encoder, sample_index, sample_attributes):
    """The app over the sample index (MiniLM) served on a free loopback port; yields the base URL."""
    from qkv.web import create_app

    yield from _serve(create_app(encoder=encoder, index_dir=sample_index, attributes_model=sample_attributes))


# ---------------------------------------------------------------- the sample as `qkv serve --sample` serves it
@pytest.fixture(scope="session")
def e5():
    """multilingual-e5-small (installed by make test), loaded once."""
    import qkv
    from qkv.web.sample import SAMPLE_MODEL

    return qkv.load(SAMPLE_MODEL)


@pytest.fixture(scope="session")
def sample_index_zh(e5, tmp_path_factory):
    """The sample catalog's index with the multilingual model, as ``qkv serve --sample`` builds it."""
    from qkv.web.sample import ensure_sample_index

    return ensure_sample_index(tmp_path_factory.mktemp("sample-index-zh"), encoder=e5)


def _app_zh(e5, index_dir):
    """The app as ``qkv serve --sample`` makes it: multilingual model, the sample's glossary (no
    attribute model: these tests do not need one)."""
    from qkv.web import create_app
    from qkv.web.sample import SAMPLE_GLOSSARY

    # the 12-layer model on a busy machine: deadlines that test the code, not the machine's load
    slow = {"deadline": 180.0}
    return create_app(encoder=e5, index_dir=index_dir, glossary=SAMPLE_GLOSSARY,
                      pools={k: slow for k in ("search", "explain", "attention", "summary")})


@pytest.fixture(scope="session")
def client_zh(e5, sample_index_zh):
    from fastapi.testclient import TestClient

    with TestClient(_app_zh(e5, sample_index_zh), raise_server_exceptions=False) as c:
        yield c


@pytest.fixture(scope="session")
def live_server_zh(e5, sample_index_zh):
    """The multilingual sample app on a free loopback port; yields the base URL."""
    yield from _serve(_app_zh(e5, sample_index_zh))


@pytest.fixture(scope="session")
def browser():
    """Headless Chromium. Missing Chromium fails the run (CI must install it with
    .ci/install-browser.sh) unless QKV_SKIP_BROWSER=1 says to skip browser tests on purpose."""
    skip = os.environ.get("QKV_SKIP_BROWSER") == "1"
    problem = None
    if not (Path(CHROMIUM).is_file() or shutil.which(CHROMIUM)):
        problem = f"Chromium not found at {CHROMIUM}: run .ci/install-browser.sh (apt-get install chromium)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "playwright is not installed: pip install -e '.[browser]'"
    if problem:
        if skip:
            pytest.skip(f"browser tests skipped on purpose (QKV_SKIP_BROWSER=1): {problem}")
        pytest.fail(f"{problem}. Set QKV_SKIP_BROWSER=1 to skip browser tests deliberately.")
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield b
        b.close()


def _page(browser, base_url, csp: bool = False):
    # Playwright's wait_for_function evaluates its predicate with eval(), which the server's CSP
    # forbids: these tests bypass it; test_web_guard.py drives every view with the CSP enforced.
    ctx = browser.new_context(viewport={"width": 1366, "height": 900}, locale="en-US", bypass_csp=not csp)
    pg = ctx.new_page()
    errors: list[str] = []
    pg.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.console_errors = errors
    pg.base_url = base_url
    return ctx, pg


@pytest.fixture
def page(browser, live_server):
    """A fresh page on the live server that records console errors; the test must leave it clean."""
    ctx, pg = _page(browser, live_server)
    yield pg
    ctx.close()


@pytest.fixture
def csp_page(browser, live_server):
    """A fresh page on the live server with its Content Security Policy enforced."""
    ctx, pg = _page(browser, live_server, csp=True)
    yield pg
    ctx.close()


@pytest.fixture
def page_zh(browser, live_server_zh):
    """A fresh page on the multilingual sample server (``live_server_zh``)."""
    ctx, pg = _page(browser, live_server_zh)
    yield pg
    ctx.close()


@pytest.fixture
def screenshot():
    """screenshot(page, name) saves artifacts/web-<name>.png (gitignored) and returns its path."""

    def take(pg, name: str) -> Path:
        ARTIFACTS.mkdir(exist_ok=True)
        path = ARTIFACTS / f"web-{name}.png"
        pg.screenshot(path=str(path), full_page=True)
        return path

    return take
