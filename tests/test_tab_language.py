"""Issue 52: in a zh-CN browser a Generate showed its placeholders in English ("Drawn after both timed runs
finish") in one of two tries. The tab's language is a gr.State that the page load's chain of events sets
(page_language, then set_language); a Generate pressed while that chain still queued got the State's initial
"en", though the page (Gradio's own i18n) already showed Chinese. The State now starts as None, and the decode
callbacks read None as "the browser's language" (its Accept-Language, what the page follows). A tiny model."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import eagle_app.views as av
from eagle_app.callbacks import decoding as cb
from eagle_app.i18n import APP_TEXT

ZH_BROWSER = "zh-CN,zh;q=0.9,en;q=0.8"


def request(session: str, accept: str | None):
    return SimpleNamespace(session_hash=session, headers={"accept-language": accept} if accept else {})


def test_the_tab_language_is_the_state_once_set_else_the_browsers():
    assert cb.tab_language("zh", request("a", "en-US")) == "zh"
    assert cb.tab_language("en", request("a", ZH_BROWSER)) == "en"  # the switch's choice wins over the browser
    assert cb.tab_language(None, request("a", ZH_BROWSER)) == "zh"  # the load has not set it yet
    assert cb.tab_language(None, request("a", "en-US")) == "en"
    assert cb.tab_language(None, SimpleNamespace(session_hash="a")) == "en"  # an API call: no headers
    assert cb.tab_language(None, None) == "en"


def test_the_pages_language_state_starts_unset():
    """Were it "en", a Generate before the load's events ran could not tell it from a chosen English."""
    from eagle_app.layout import build

    page = build()
    assert page.c["lang"].value is None


@pytest.fixture()
def tiny_app_model():
    from eagle_core.decode import Engine
    from tests.conftest import tiny_head, tiny_target

    target = tiny_target()
    before = (cb.MODEL.engine, cb.MODEL.error, cb.MODEL.ready.is_set())
    cb.MODEL.set_engine(Engine(target, tiny_head(target), None, "tiny head"))
    yield
    cb.MODEL.engine, cb.MODEL.error = before[:2]
    if not before[2]:
        cb.MODEL.ready.clear()


def test_a_generate_before_the_load_sets_the_language_draws_its_placeholders_in_the_browsers(tiny_app_model):
    from eagle_app.settings import FIELDS

    r = request("zh-tab", ZH_BROWSER)
    values = [f.value for f in FIELDS]
    gen = cb.generate("Say hello.", *values, True, av.new_state(), cb.arm(r), None, request=r)
    try:
        for out in gen:
            tree = av.named(out).get("tree")
            if tree is not None and getattr(tree, "layout", None) is not None and tree.layout.annotations:
                shown = tree.layout.annotations[0].text
                break
        else:
            pytest.fail("no placeholder was drawn")
    finally:
        gen.close()
    assert shown == APP_TEXT("wait.figure", "zh", what=APP_TEXT("wait.after_runs", "zh")), shown
    assert "Drawn" not in shown
