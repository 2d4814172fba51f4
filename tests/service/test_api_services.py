"""The facade makes each service on first use: one instance per facade, shared by the services that
depend on it, whatever thread asks first."""

from __future__ import annotations

import threading

from cairn.core.principal import Principal
from cairn.service.api import SERVICE_CLASSES, Cairn, service_class


def test_a_service_is_made_when_first_used_and_then_kept(svc: Cairn, me: Principal) -> None:
    services = svc.services
    assert "consolidation" not in vars(services)  # nothing asked for it yet
    svc.write(me, "repo::acme/api", "retry", "Retry idempotent calls with backoff")
    assert "lessons" in vars(services) and "consolidation" not in vars(services)
    assert services.lifecycle.lessons is services.lessons  # a dependency is the facade's own instance
    assert services.consolidation is services.consolidation
    assert "backoff" in str(svc.read(me, "repo::acme/api", "retry"))


def test_every_operation_names_a_known_service_and_method() -> None:
    for name, op in vars(Cairn).items():
        if hasattr(op, "service") and hasattr(op, "name"):
            assert op.service in SERVICE_CLASSES, name
            assert callable(getattr(service_class(op.service), op.name)), name
            assert getattr(Cairn, name) is getattr(service_class(op.service), op.name)


def test_threads_asking_at_once_get_one_instance(svc: Cairn) -> None:
    start = threading.Barrier(8)
    got: list[object] = []

    def ask() -> None:
        start.wait()
        got.append(svc.services.search)

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(got) == 8 and len({id(x) for x in got}) == 1
    assert svc.services.search.embeddings is svc.services.embeddings
