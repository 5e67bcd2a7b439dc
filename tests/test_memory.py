"""Closed panes are freed: nothing in a real server keeps their screens and scrollback.

``server.stats`` reports ``live_panes``, the pane objects still in memory (after a full
collection when there are more than the open panes), so a closed pane that something
still holds shows up there.
"""

from __future__ import annotations

import time

from conftest import Api

from cmux_core.heap import RELEASE_S, SETTLE_S
from cmux_core.testing import wait_until

LINES = 3000


def _settled(api: Api) -> dict[str, int] | None:
    stats = api("server.stats")
    return stats if stats["live_panes"] == stats["panes"] else None


def test_split_and_close_churn_leaves_only_the_open_panes_in_memory(api: Api) -> None:
    first = api.focused_pane()
    for _ in range(40):
        pane = api.run(["sh", "-c", f"seq {LINES}; exec sleep 60"])
        api.wait_text(pane, str(LINES))
        api("pane.get", {"pane_id": pane})
        api("pane.read", {"pane_id": pane, "source": "recent", "lines": 5})
        api("pane.close", {"pane_id": pane})
    stats = wait_until(lambda: _settled(api), 30, message="closed panes to be freed")
    assert stats["panes"] == 1
    assert api("pane.get", {"pane_id": first})["pane"]["pane_id"] == first


def test_a_closed_pane_is_freed_while_its_process_is_still_being_reaped(api: Api) -> None:
    pane = api.run(["sh", "-c", f"trap '' HUP; seq {LINES}; sleep 60"])
    api.wait_text(pane, str(LINES))
    api("pane.get", {"pane_id": pane})
    api("pane.close", {"pane_id": pane})
    stats = api("server.stats")
    # The process ignores SIGHUP, so it lives on until the SIGKILL two seconds later.
    assert stats["closing_terminals"] == 1
    assert stats["live_panes"] == stats["panes"] == 1


def test_a_status_subscription_does_not_keep_its_closed_pane(api: Api) -> None:
    pane = api.run(["sh", "-c", f"seq {LINES}; exec sleep 60"])
    api.wait_text(pane, str(LINES))
    listener = Api(api.server)
    try:
        assert listener("events.subscribe", {"subscriptions": [
            {"type": "pane.agent_status_changed", "pane_id": pane}]})["type"] == \
            "subscription_started"
        api("pane.close", {"pane_id": pane})
        stats = wait_until(lambda: _settled(api), 30, message="the closed pane to be freed")
        assert stats["panes"] == 1
    finally:
        listener.close()


def test_the_settled_heap_is_frozen_and_a_close_frees_its_pane_without_being_asked(
        api: Api) -> None:
    """The long-lived heap is frozen once the session is quiet, so routine full passes of
    the cycle collector walk only new objects; closing a pane asks for one full pass over
    everything a moment later, which frees the closed pane without ``server.stats``
    having to ask for it (it asks only while a closed pane is still counted)."""
    freezes = api("server.stats")["heap"]["freezes"]
    panes = [api.run(["sh", "-c", f"seq {LINES}; exec sleep 60"]) for _ in range(3)]
    for pane in panes:
        api.wait_text(pane, str(LINES))
    before = wait_until(lambda: (h := api("server.stats")["heap"])["freezes"] > freezes and h,
                        SETTLE_S + 10, message="the heap frozen once the new panes settle")
    assert before["frozen"] > 1000
    for pane in panes:
        api("pane.close", {"pane_id": pane})
    time.sleep(RELEASE_S + 1.5)
    stats = api("server.stats")
    assert stats["heap"]["full_passes"]["released"] == before["full_passes"]["released"] + 1
    assert stats["heap"]["full_passes"]["asked"] == before["full_passes"]["asked"]
    assert stats["live_panes"] == stats["panes"]
