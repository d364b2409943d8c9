"""The OpenAPI contract is the server's: Schemathesis generates requests from /openapi.json (valid
and invalid ones) for every operation and runs all its checks against the ASGI app — no server
error, every status and body documented, nothing the schema calls invalid accepted. A few hundred
cases by default, thousands under -m slow."""

from __future__ import annotations

import pytest

schemathesis = pytest.importorskip("schemathesis", reason="schemathesis is a test extra: pip install -e '.[test]'")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402
from schemathesis.generation.modes import GenerationMode  # noqa: E402
from schemathesis.specs.openapi.checks import negative_data_rejection  # noqa: E402

OPERATIONS = ["GET /api/health", "POST /api/attention", "POST /api/rollout", "POST /api/neuron", "POST /api/tour",
              "POST /api/search", "POST /api/search/explain", "GET /api/search/fields", "POST /api/attributes",
              "POST /api/summarize", "POST /api/summarize/upload"]


def _without_lifespan(app):
    """The app for Schemathesis' ASGI transport, which starts and stops an app's lifespan around
    every request: the session's app (pools, index) stays up for the other tests."""

    async def asgi(scope, receive, send):
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                await send({"type": message["type"] + ".complete"})
                if message["type"] == "lifespan.shutdown":
                    return
        await app(scope, receive, send)

    return asgi


# A request the schema calls valid may still be refused for what only the server knows: a layer
# beyond this model's, a product no longer in the index, a file that holds no reviews, a filter on
# a field this index lacks. Those answers (404, 422) are documented. A request over a size limit
# (maxLength, maxItems) is refused with 413, as documented, where Schemathesis expects another 4xx.
# Every other check is as shipped.
CONFIG = """
[checks.positive_data_acceptance]
expected-statuses = ["2xx", "401", "403", "404", "409", "422", "429"]

[checks.negative_data_rejection]
expected-statuses = ["400", "401", "403", "404", "405", "406", "409", "413", "415", "422", "428", "429", "5xx"]
"""


@pytest.fixture(scope="module")
def api_schema(client):
    config = schemathesis.config.SchemathesisConfig.from_str(CONFIG)
    return schemathesis.openapi.from_asgi("/openapi.json", _without_lifespan(client.app), config=config)


def test_the_schema_lists_every_operation(api_schema):
    assert sorted(f"{o.ok().method.upper()} {o.ok().path}" for o in api_schema.get_all_operations()) == sorted(OPERATIONS)


def _fuzz(api_schema, client, name: str, examples: int) -> None:
    method, path = name.split(" ")
    operation = api_schema[path][method]

    # requests the schema calls valid and ones it calls invalid (each must then be refused)
    cases = st.one_of(operation.as_strategy(generation_mode=GenerationMode.POSITIVE),
                      operation.as_strategy(generation_mode=GenerationMode.NEGATIVE))

    @given(case=cases)
    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    def run(case):
        if case.media_type == "multipart/form-data":
            # on the wire every form part is text or bytes: a "file" or "budget" mutated to another
            # JSON type is the same characters (-1587 is a valid file, "5" a valid budget), so no
            # server can tell such "invalid" data apart; every other check applies
            case.call_and_validate(excluded_checks=[negative_data_rejection])
        else:
            case.call_and_validate()  # every check Schemathesis has

    run()
    assert client.get("/api/health").status_code == 200  # and the server is fine afterwards


@pytest.mark.parametrize("name", OPERATIONS)
def test_every_operation_keeps_its_contract(api_schema, client, name):
    _fuzz(api_schema, client, name, 25)


@pytest.mark.slow
@pytest.mark.parametrize("name", OPERATIONS)
def test_every_operation_keeps_its_contract_at_length(api_schema, client, name):
    _fuzz(api_schema, client, name, 400)


def test_error_statuses_are_documented_with_their_body(client):
    spec = client.get("/openapi.json").json()
    for path, ops in spec["paths"].items():
        for method, op in ops.items():
            for status in ("400", "413", "422", "429", "503"):
                ref = op["responses"][status]["content"]["application/json"]["schema"]["$ref"]
                assert ref.endswith("/ErrorBody"), (method, path, status)
    body = spec["components"]["schemas"]["ErrorBody"]
    assert body["required"] == ["error"]
    k = spec["components"]["schemas"]["SearchRequest"]["properties"]["k"]
    assert (k["type"], k["minimum"], k["maximum"]) == ("integer", 1, client.get("/api/health").json()["limits"]["max_results"])
