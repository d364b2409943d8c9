"""qkv.progress: the one shape of progress reports, ``progress(stage, done, total)``, running counts."""

from qkv.progress import Count, relay


def test_count_opens_at_zero_and_reports_running_counts():
    seen = []
    c = Count(lambda *a: seen.append(a), "encode", 10)
    c.add(4)
    c.add(6)
    c.set(10)
    assert seen == [("encode", 0, 10), ("encode", 4, 10), ("encode", 10, 10), ("encode", 10, 10)]
    assert c.done == 10


def test_count_without_a_callback_only_counts():
    c = Count(None, "fit", None)
    c.add()
    c.add(2)
    assert c.done == 3


def test_relay_relabels_an_inner_calls_counts_into_the_callers():
    seen = []
    outer = lambda *a: seen.append(a)  # noqa: E731
    first = relay(outer, "embed", offset=0, total=7)
    Count(first, "encode", 3).add(3)  # the encoder on chunk 1: its own stage and total
    second = relay(outer, "embed", offset=3, total=7)
    c = Count(second, "encode", 4)
    c.add(2)
    c.add(2)
    assert seen == [("embed", 0, 7), ("embed", 3, 7), ("embed", 5, 7), ("embed", 7, 7)]
    assert relay(None, "embed") is None


# ---------------------------------------------------------------- real calls report the one shape
def _recorder():
    calls = []
    return calls, lambda *a: calls.append(a)


def assert_shape(calls, stages):
    """Every report is (str, int, int | None); each stage opens at 0, counts up to its total, and
    the stages come in the order given."""
    assert calls, "no progress was reported"
    assert all(len(c) == 3 and isinstance(c[0], str) and isinstance(c[1], int)
               and (c[2] is None or isinstance(c[2], int)) for c in calls), calls
    order = list(dict.fromkeys(c[0] for c in calls))
    assert order == list(stages), order
    for s in stages:
        done = [c[1] for c in calls if c[0] == s]
        total = calls[[c[0] for c in calls].index(s)][2]
        assert done[0] == 0 and done == sorted(done), (s, done)
        if total is not None:
            assert done[-1] <= total, (s, done, total)


def test_encoder_reports_encode(encoder):
    calls, cb = _recorder()
    encoder.encode(["red shoes", "a blue kettle", "green tea", "socks", "a very long " * 3], batch_size=2, progress=cb)
    assert_shape(calls, ["encode"])
    assert calls[-1] == ("encode", 5, 5)


def test_attribute_training_reports_encode_then_fit(encoder):
    from qkv.attributes import AttributeModel, Example

    brands, things = ["Zorvex", "Kallipo", "Mentura", "Brisko"], ["Running Shoes", "Rain Jacket", "Yoga Mat"]
    examples = [Example(f"{b} {t} Black", {"Brand": (b,), "Type": (t,)}, "Outdoor") for b in brands for t in things]
    calls, cb = _recorder()
    model, _ = AttributeModel.train(examples, encoder, max_iter=3, progress=cb)
    assert_shape(calls, ["encode", "fit"])
    assert ("encode", len(examples), len(examples)) in calls and calls[-1][2] == 3
    calls.clear()
    model.extract([e.title for e in examples], batch_size=5, progress=cb)
    assert_shape(calls, ["extract"])
    assert calls[-1] == ("extract", len(examples), len(examples))


def test_summary_evaluation_reports_encode_then_score(encoder):
    from qkv.summarize.evaluate import evaluate, prepare_all
    from qkv.summarize.readers import Product, Review

    reviews = (Review("Light and comfortable. The sole came off after a month."), Review("Very comfortable shoes."))
    products = [Product("p1", reviews, ("Comfortable, but the sole came off.",))]
    calls, cb = _recorder()
    docs = prepare_all(products, encoder, progress=cb)
    evaluate(products, budgets=(10, 20), systems=("qkv", "lead"), encoder=encoder, docs=docs, progress=cb)
    assert_shape(calls, ["encode", "score"])
    assert calls[-1] == ("score", 4, 4)


def test_index_build_reports_embed_and_migration_reports_copy(encoder, small_csv, tmp_path):
    from qkv.scale.migrate import migrate
    from qkv.search import build_index

    calls, cb = _recorder()
    build_index(small_csv, tmp_path / "idx", encoder, batch_size=4, chunk=5, progress=cb)
    assert_shape(calls, ["embed"])
    n = calls[0][2]
    assert n == 12 and calls[-1] == ("embed", n, n)  # chunks of 5 count on as one stage of 12 titles
    calls.clear()
    migrate(tmp_path / "idx", str(tmp_path / "copy"), progress=cb)
    assert_shape(calls, ["copy"])
    assert calls[-1] == ("copy", 12, 12)
