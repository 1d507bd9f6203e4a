"""Where a sweep's simulations run: here, a local process pool, or a Ray cluster.

All three map one picklable function over the candidates in order and yield the results in
that order, so a sweep's answer does not depend on where it ran (each simulation is
deterministic). Ray is optional: `--ray ADDRESS` (or `auto`, a cluster this machine started)
connects to a running cluster (`ray start --head` makes one); an address that does not answer
is one clear error within seconds, not Ray's own minutes of retries.
"""

from __future__ import annotations

import os
import socket
from concurrent.futures import ProcessPoolExecutor

from itlkit.errors import ConfigError

CONNECT_SECONDS = 3.0  # a Ray head's GCS port answers a TCP connect at once when it is up


def local_map(function, items: list, workers: int | None):
    """`function` over `items` in order: here (one worker) or over a process pool."""
    count = min(os.cpu_count() or 1 if workers is None else workers, len(items))
    if count <= 1:
        yield from map(function, items)
        return
    with ProcessPoolExecutor(max_workers=count) as pool:
        yield from pool.map(function, items)


def ray_map(function, items: list, address: str):
    """`function` over `items` in order, as Ray tasks on the cluster at `address`."""
    ray = _ray()
    _check_answers(address)
    try:
        ray.init(address=address, log_to_driver=False, ignore_reinit_error=True)
    except ConnectionError as exc:
        raise ConfigError(f"Ray cluster at {address!r} does not answer: {exc}") from None
    try:
        task, shared = ray.remote(_apply), ray.put(function)  # the function sent once
        futures = [task.remote(shared, item) for item in items]
        for future in futures:
            yield ray.get(future)
    finally:
        ray.shutdown()


def _apply(function, item):
    """A Ray task: one item (Ray takes functions, not partials, as tasks)."""
    return function(item)


def _ray():
    try:
        import ray
    except ImportError:
        raise ConfigError("--ray needs Ray: pip install 'ray>=2.40'") from None
    return ray


def _check_answers(address: str) -> None:
    """A host:port address must accept a TCP connection (Ray would retry for minutes)."""
    if address == "auto" or address.startswith("ray://"):
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"Ray address {address!r}: give HOST:PORT (the head's GCS port, "
                          "6379 by default) or auto")  # fmt: skip
    try:
        socket.create_connection((host, int(port)), timeout=CONNECT_SECONDS).close()
    except OSError as exc:
        raise ConfigError(f"Ray cluster at {address!r} does not answer: {exc}") from None
