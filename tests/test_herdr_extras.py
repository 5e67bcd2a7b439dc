"""herdr's methods outside the Local API seed, on a real server: answered, never
``method_not_found``."""

from __future__ import annotations

from conftest import Api

from cmux_core.api.methods.herdr_extras import NOT_SUPPORTED


def test_herdr_methods_outside_the_seed_answer_as_a_headless_server_can(api: Api) -> None:
    listed = set(api("system.capabilities")["methods"])
    for method, reason in NOT_SUPPORTED.items():
        err = api.error(method, {})
        assert err["code"] == "not_supported" and reason in err["message"], method
        assert method not in listed
    assert {"notification.show", "server.reload_config", "popup.close"} <= listed
    shown = api("notification.show", {"title": "build\ndone", "sound": "done"})
    assert shown == {"type": "notification_show", "shown": False,
                     "reason": "no_foreground_client"}
    assert api.error("notification.show", {"title": " \t"})["data"]["field"] == "title"
    assert api.error("notification.show", {"title": "x", "sound": "loud"})["code"] == (
        "invalid_params")
    assert api("client.window_title.set", {"title": "agents"})["reason"] == (
        "no_foreground_client")
    assert api.error("client.window_title.set", {"title": ""})["code"] == "invalid_params"
    assert api("client.window_title.clear")["changed"] is False
    assert api.error("popup.close")["code"] == "popup_not_open"
    reload = api("server.reload_config")
    assert reload["type"] == "config_reload" and reload["status"] == "applied"
    assert "take effect at the next start" in reload["diagnostics"][-1]
