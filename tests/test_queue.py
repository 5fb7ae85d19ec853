"""The decode line as a class uses it: several tabs at once, with the same default settings.

Each test here failed on the line of 2026-12-03 morning, whose tickets were dicts compared by
value: two waiting runs with the same settings were "equal", so one leaving removed the other's
ticket (the dead one then held the slot for good), and every waiting run was told "1 run ahead".
A second Generate from the same tab only stopped the first run (Gradio's default trigger mode
dropped the new request while the old one was pending)."""
from __future__ import annotations

import threading
import time

from eagle_app import views as av
from eagle_app.callbacks import decoding as cb
from eagle_app.decode_queue import DecodeLine
from eagle_app.worker import Deadline
from tests.app_fixtures import _app_model, engine, in_thread, req, start_generate, statuses, wait_for  # noqa: F401

DEFAULTS = dict(method="eagle2", depth=2, tree_top_k=2, total_tokens=4, chain_length=4, temperature=0.0, top_p=1.0,
                top_k=0, max_new=8, seed=0)


def generate(session: str, prompt: str, **kw):
    return start_generate(prompt, session, {**DEFAULTS, **kw})


def test_leaving_removes_exactly_ones_own_ticket():
    """X holds the slot; Y and Z wait with the same settings; Z leaves; X ends: Y gets the slot."""
    line = DecodeLine(rate=10.0)
    x, y, z = line.join(96), line.join(96), line.join(96)
    line.leave(z)
    line.leave(x)
    assert line.wait(y, 0.01)
    line.leave(y)
    w = line.join(96)  # and a newcomer is served too
    assert line.wait(w, 0.01)
    line.leave(w)
    line.leave(w)  # leaving twice is harmless
    assert line.waiting() == 0


def test_each_waiting_run_is_told_its_own_place():
    line = DecodeLine(rate=10.0)
    tickets = [line.join(96) for _ in range(8)]
    places = [line.place(t)[0] for t in tickets]
    assert places == list(range(8))
    waits = [line.place(t)[1] for t in tickets]
    assert all(a < b for a, b in zip(waits, waits[1:]))  # each later place waits longer
    assert line.waiting() == 7
    for t in tickets:
        line.leave(t)


def test_fair_share_limit_applies_only_while_others_wait():
    user, crowded = threading.Event(), [False]
    flag = Deadline(user, budget_s=60.0, fair_s=0.05, crowded=lambda: crowded[0]).arm()
    time.sleep(0.1)
    assert not flag.is_set()  # past the fair-share limit, but nobody waits
    crowded[0] = True
    assert flag.is_set() and flag.limit == "fair"
    budget = Deadline(user, budget_s=0.01, fair_s=60.0).arm()
    time.sleep(0.05)
    assert budget.is_set() and budget.limit == "budget"


def test_three_tabs_one_leaves_the_others_are_served():
    """The issue's class scenario with callbacks: X runs, Y and Z queue with the defaults, Z is
    told "2 runs ahead" and closes its tab; W arrives later. Y and W get their own replies."""
    tx, x = in_thread(generate("X", "Write a long story about a lighthouse keeper.", max_new=200))
    assert wait_for(lambda: any("The page stays still" in s for s in statuses(x)))
    ty, y = in_thread(generate("Y", "Name a colour."))
    assert wait_for(lambda: any("1 run ahead of yours" in s for s in statuses(y)), 10)
    tz, z = in_thread(generate("Z", "Name a colour."))
    assert wait_for(lambda: any("2 runs ahead of yours" in s for s in statuses(z)), 10), statuses(z)
    cb.forget_session(req("Z"))  # Z closes its tab
    tz.join(10)
    assert not tz.is_alive() and "nothing ran" in statuses(z)[-1]
    tw, w = in_thread(generate("W", "Name a fruit."))
    assert wait_for(lambda: any("ahead of yours" in s or "stays still" in s for s in statuses(w)), 30)
    for t in (tx, ty, tw):
        t.join(240)
        assert not t.is_alive()
    for outs, prompt in ((y, "Name a colour."), (w, "Name a fruit.")):
        state = outs[-1]["state"]
        assert state["eagle"].summary.prompt == prompt == state["vanilla"].summary.prompt
        assert "Done." in outs[-1]["status"]
    assert cb.LINE.waiting() == 0 and cb.LINE.place(object())[0] == 0


def test_second_generate_replaces_the_running_one():
    """A new Generate from the same tab ends its earlier run without touching the page, and runs."""
    t1, first = in_thread(generate("R", "Write a long story about a dragon.", max_new=400))
    assert wait_for(lambda: any("The page stays still" in s for s in statuses(first)))
    t2, second = in_thread(generate("R", "Name a fruit.", max_new=8))
    t1.join(60)
    assert not t1.is_alive()
    assert not any("state" in o for o in first)  # the replaced run drew nothing at its end
    t2.join(120)
    final = second[-1]
    assert final["state"]["eagle"].summary.prompt == "Name a fruit."
    assert "Done." in final["status"] and "stopped" not in final["status"]


def test_generate_event_accepts_a_click_while_pending():
    """Gradio's default trigger mode ("once") drops a click while the event is pending; the
    generate event must take it, so that the new prompt runs."""
    import app

    deps = [d for d in app.demo.config["dependencies"] if d.get("api_name") == "generate"]
    assert deps and all(d["trigger_mode"] == "multiple" for d in deps)


def test_a_waiting_run_hears_the_fair_share_rule():
    other = cb.LINE.join(100)
    try:
        gen = generate("F", "Say hello.")
        status = av.named(next(gen))["status"]
        assert "1 run ahead of yours" in status and f"{cb.FAIR_BUDGET_S:g} s per method" in status
        cb.stop(req("F"))
        list(gen)
    finally:
        cb.LINE.leave(other)


def test_a_run_that_held_the_slot_gives_memory_back_when_it_leaves(monkeypatch):
    """glibc keeps freed pages: the line trims the C heap after each run (not after a waiting run leaves)."""
    import eagle_app.decode_queue as decode_queue

    calls = []
    monkeypatch.setattr(decode_queue, "give_back_memory", lambda: calls.append(1))
    line = DecodeLine(rate=10.0)
    held, waiting = line.join(10), line.join(10)
    line.leave(waiting)
    assert calls == []
    line.leave(held, tokens=10, seconds=1.0)
    assert calls == [1]
    monkeypatch.undo()
    decode_queue.give_back_memory()  # and the real one runs anywhere (a no-op without glibc)
