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
    # A server of its own: the gateway mounted in the app is this test's configuration.
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


def test_the_cairn_gateway_command_serves_and_never_logs_the_key(gw: Rig, tmp_path: Path) -> None:
    """The real command in its own process, pointed at the fake provider, the key from a named variable."""
    import os
    import socket
    import subprocess
    import sys
    import time

    import httpx2
    import openai

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "CAIRN_HOME": str(tmp_path), "CAIRN_NO_DAEMON": "1", "GW_PROVIDER_KEY": PROVIDER_KEY}
    log = tmp_path / "gateway.log"
    with log.open("w") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "cairn.cli.main", "--db", gw.store.url, "gateway", "--upstream", gw.upstream,
             "--upstream-key-env", "GW_PROVIDER_KEY", "--port", str(port)],
            env=env, stdout=out, stderr=out,
        )  # fmt: skip
        try:
            base = f"http://127.0.0.1:{port}"
            for _ in range(300):
                try:
                    if httpx2.get(base + "/v1/health", timeout=1, trust_env=False).status_code == 200:
                        break
                except httpx2.HTTPError:
                    time.sleep(0.1)
            client = openai.OpenAI(base_url=base + "/v1", api_key=gw.alice, max_retries=0)
            reply = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
            assert reply.choices[0].message.content == TEXT
            assert gw.fake.last["headers"]["authorization"] == f"Bearer {PROVIDER_KEY}"
        finally:
            proc.terminate()
            proc.wait(timeout=30)
    text = log.read_text()
    assert "cairn gateway on http://127.0.0.1" in text and PROVIDER_KEY not in text
