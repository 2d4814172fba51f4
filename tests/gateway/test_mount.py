"""The gateway mounted in `cairn serve`'s API app, and its configuration (flags, [gateway], refusals)."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.api.app import create_app
from cairn.errors import CairnError
from cairn.gateway.app import Gateway, Upstream, configure, from_settings
from cairn.runtime.settings import load
from cairn.service.conversations import Conversations
from tests.gateway.conftest import PROVIDER_KEY, Rig
from tests.gateway.fake_upstream import TEXT
from tests.http_server import serving


def test_mounted_in_the_api_beside_v1(gw: Rig) -> None:
    import openai

    gateway = Gateway(Conversations(gw.svc), Upstream(gw.upstream, PROVIDER_KEY))
    with serving(create_app(gw.svc, mcp=False, gateway=gateway)) as base:
        client = openai.OpenAI(base_url=base + "/v1", api_key=gw.alice, max_retries=0)
        reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
        assert reply.choices[0].message.content == TEXT
        assert [m.id for m in client.models.list().data] == ["fake-1"]
        import httpx2

        health = httpx2.get(base + "/v1/health", trust_env=False)  # the API is still there
        assert health.status_code == 200


def test_configuration_from_settings_flags_and_the_key_variable(
    gw: Rig, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert from_settings(gw.svc) is None  # no gateway.upstream: cairn serve mounts nothing
    with pytest.raises(CairnError, match="no upstream"):
        configure(gw.svc)
    monkeypatch.delenv("BENCH_NO_SUCH_KEY", raising=False)
    with pytest.raises(CairnError, match=r"\$BENCH_NO_SUCH_KEY is empty or unset"):
        configure(gw.svc, "http://127.0.0.1:9", "BENCH_NO_SUCH_KEY")
    monkeypatch.setenv("GW_TEST_KEY", PROVIDER_KEY)
    made = configure(gw.svc, "https://api.example.com/v1/", "GW_TEST_KEY")
    assert made.upstream.base == "https://api.example.com" and made.upstream.key == PROVIDER_KEY
    assert PROVIDER_KEY not in repr(made)

    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text('[gateway]\nupstream = "https://api.example.com"\nextract = 1\n')
    settings = load(home)
    assert settings.gateway_upstream == "https://api.example.com" and settings.gateway_extract == 1
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / ".cairn.toml").write_text('[gateway]\nupstream = "https://evil.example"\n')
    with pytest.raises(CairnError, match=r"\[gateway\] settings are read from"):
        load(home, repo)
