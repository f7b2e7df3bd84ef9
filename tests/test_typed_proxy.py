"""Typed pykka proxies (scheduler/actors/typed_proxy.py): calls go through, proxy types that do
not fit their actor are refused where the proxy is made, and mypy checks calls through them."""

from __future__ import annotations

import textwrap
from collections.abc import Iterator
from pathlib import Path

import pykka
import pytest
from mypy import api as mypy_api

from scheduler.actors.typed_proxy import (
    ActorMemberMixin,
    ProxyTypeError,
    mismatches,
    proxy_field,
    proxy_method,
    start_proxy,
    typed_proxy,
)


class Counter(pykka.ThreadingActor):
    total: int = 0
    """A field a proxy reads: declared on the class, as `proxy_field` needs."""

    def __init__(self, start: int, *, step: int = 1) -> None:
        super().__init__()
        self.total = start
        self.step = step

    def add(self, times: int) -> int:
        self.total += times * self.step
        return self.total


class CounterProxy(ActorMemberMixin, pykka.ActorProxy[Counter]):
    add = proxy_method(Counter.add)
    total = proxy_field(Counter.total)


class MisnamedProxy(ActorMemberMixin, pykka.ActorProxy[Counter]):
    increase = proxy_method(Counter.add)


class SwappedProxy(ActorMemberMixin, pykka.ActorProxy[Counter]):
    on_start = proxy_method(Counter.add)  # type: ignore[assignment]


@pytest.fixture(autouse=True)
def no_actor_left() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all()


def test_a_started_typed_proxy_passes_the_constructors_arguments_and_answers() -> None:
    counter = start_proxy(Counter, CounterProxy, 10, step=5)
    assert counter.add(2).get(timeout=10) == 20
    assert counter.total.get(timeout=10) == 20


def test_a_typed_proxy_of_a_running_actor_reaches_the_same_actor() -> None:
    ref = Counter.start(0)
    first, second = typed_proxy(ref, CounterProxy), typed_proxy(ref, CounterProxy)
    first.add(1).get(timeout=10)
    assert second.add(1).get(timeout=10) == 2


def test_a_proxy_type_declaring_what_its_actor_lacks_is_refused_when_the_proxy_is_made() -> None:
    with pytest.raises(ProxyTypeError, match=r"MisnamedProxy.increase: Counter has no increase"):
        start_proxy(Counter, MisnamedProxy, 0)
    assert mismatches(Counter, CounterProxy) == []


def test_a_method_declared_under_another_methods_name_is_refused() -> None:
    found = mismatches(Counter, SwappedProxy)
    assert len(found) == 1 and "declared from Counter.add, not from Counter.on_start" in found[0]
    with pytest.raises(ProxyTypeError):
        typed_proxy(Counter.start(0), SwappedProxy)


@pytest.mark.slow
def test_mypy_reports_a_wrong_call_through_a_typed_proxy(tmp_path: Path) -> None:
    module = tmp_path / "uses_counter.py"
    module.write_text(
        textwrap.dedent(
            """
            import pykka
            from scheduler.actors.typed_proxy import (
                ActorMemberMixin, proxy_method, start_proxy,
            )

            class Counter(pykka.ThreadingActor):
                def __init__(self, start: int) -> None:
                    super().__init__()
                    self.total = start

                def add(self, times: int) -> int:
                    return self.total + times

            class CounterProxy(ActorMemberMixin, pykka.ActorProxy[Counter]):
                add = proxy_method(Counter.add)

            counter = start_proxy(Counter, CounterProxy, 1)
            total: int = counter.add(2).get()
            counter.add("two")
            start_proxy(Counter, CounterProxy, "one")
            counter.add.defer(3)
            counter.add.defer("three")
            """
        )
    )
    config = tmp_path / "mypy.ini"
    # Only pykka and the helper are analysed: following `scheduler`'s own imports would check
    # the whole package, which the CI step does.
    # mypy_path names the checkout: an editable install is an import hook mypy cannot follow,
    # and the process's working directory is whatever earlier tests left it.
    root = Path(__file__).resolve().parents[1]
    config.write_text(
        f"[mypy]\nmypy_path = {root}\nstrict = True\nfollow_imports = skip\nincremental = False\n"
        "[mypy-pykka,pykka.*,scheduler.actors.typed_proxy]\nfollow_imports = normal\n"
    )
    out, _, status = mypy_api.run(["--config-file", str(config), str(module)])
    errors = [line for line in out.splitlines() if ": error:" in line]
    assert status == 1 and len(errors) == 3, out
    assert "py:20: error: Argument 1" in errors[0]
    assert 'incompatible type "str"; expected "int"' in errors[0]
    assert "py:21: error:" in errors[1] and '"start_proxy"' in errors[1]
    assert "py:23: error: Argument 1" in errors[2] and '"defer"' in errors[2]
