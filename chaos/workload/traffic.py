"""The shape of a producer's traffic: value sizes, key space, headers, tombstones and a rate pattern.

:class:`Traffic` describes it; :meth:`Traffic.shape` resolves it for one producer and one seed into a
:class:`TrafficShape`, whose every choice is a pure function of ``(seed, seq)``: a replay — or a checkpointed
producer that resends a value after a restart — sends the same key, size and tombstone for the same
sequence number.

Every record of a shaped producer carries its value id twice: at the start of the value (``id``, or
``id|`` and padding to the wanted size, which the audit's pattern reads) and in the header
:data:`~chaos.run.events.VALUE_ID_HEADER`. A tombstone (a null value) carries it only in the header.
"""

from __future__ import annotations

import bisect
import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from chaos.errors import ConfigError
from chaos.run.events import VALUE_ID_HEADER

KeySkew = Literal["sequential", "uniform", "zipf"]
KEY_SKEWS: Final = ("sequential", "uniform", "zipf")
MAX_VALUE_BYTES: Final = 64 * 1024 * 1024
MAX_KEYS: Final = 10_000_000
MAX_ZIPF_KEYS: Final = 1_000_000  # its table is built once per producer
_MASK64: Final = 2**64 - 1
_GOLDEN: Final = 0x9E3779B97F4A7C15
_STREAM_KEY: Final = 1
_STREAM_SIZE: Final = 2
_STREAM_TOMBSTONE: Final = 3
_PAD_ALPHABET: Final = b"abcdefghijklmnopqrstuvwxyz0123456789"
_PAD_BLOCK: Final = bytes(_PAD_ALPHABET[(i * 7919 + i // 36) % len(_PAD_ALPHABET)] for i in range(4096))
_PAD_TWICE: Final = _PAD_BLOCK * 2

Header = tuple[str, bytes]


def _mix(x: int) -> int:
    """splitmix64's finalizer: a well-spread 64-bit word from any 64-bit word."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK64
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK64
    return x ^ (x >> 31)


def unit(seed: int, seq: int, stream: int) -> float:
    """A uniform draw in [0, 1) for ``seq``'s choice ``stream``: a pure function of its arguments."""
    return (_mix((seed + (seq * 4 + stream) * _GOLDEN) & _MASK64) >> 11) * 2.0**-53


def producer_seed(base: int, producer: str) -> int:
    """The 64-bit seed of producer ``producer`` under the run's (or the traffic's) ``base`` seed."""
    digest = hashlib.blake2b(f"{base}/{producer}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def _is_number(value: object) -> bool:
    return type(value) in (int, float) and math.isfinite(value)  # type: ignore[arg-type]


def _size_table(sizes: object) -> tuple[tuple[float, int, int], ...]:
    """``sizes`` as (cumulative weight, lowest, highest) rows: ``(lo, hi)`` is one uniform range, a sequence
    of ``(size, weight)`` pairs a weighted choice of fixed sizes."""
    fix = (
        "sizes: expected (lo, hi) — a uniform range of byte counts, 1 <= lo <= hi — or a sequence of "
        "(size, weight) pairs with weights > 0, e.g. [(100, 0.9), (10_000, 0.1)]"
    )
    if not isinstance(sizes, Sequence) or isinstance(sizes, str | bytes) or not sizes:
        raise ConfigError(f"Traffic.{fix}; got {sizes!r}")
    if len(sizes) == 2 and all(type(s) is int for s in sizes):
        lo, hi = sizes
        if not 1 <= lo <= hi <= MAX_VALUE_BYTES:
            raise ConfigError(f"Traffic.{fix} (at most {MAX_VALUE_BYTES} bytes); got {sizes!r}")
        return ((1.0, lo, hi),)
    rows: list[tuple[float, int, int]] = []
    total = 0.0
    for pair in sizes:
        if (
            not isinstance(pair, Sequence)
            or len(pair) != 2
            or type(pair[0]) is not int
            or not 1 <= pair[0] <= MAX_VALUE_BYTES
            or not _is_number(pair[1])
            or not pair[1] > 0
        ):
            raise ConfigError(f"Traffic.{fix}; got the pair {pair!r} in {sizes!r}")
        total += float(pair[1])
        rows.append((total, pair[0], pair[0]))
    return tuple((cum / total, lo, hi) for cum, lo, hi in rows)


@dataclass(frozen=True)
class Traffic:
    """What a producer's records look like and when they are sent.

    :param size: every value this many bytes (``None``: no padding).
    :param sizes: a seeded distribution of value sizes instead: ``(lo, hi)`` uniform in bytes, or
        ``[(size, weight), ...]``. A value is its id, ``|``, then padding to the size drawn — never shorter
        than the id and its ``|``.
    :param keys: the key space ``k0`` .. ``k<keys-1>``; ``None``: keyless records.
    :param key_skew: how a record's key is chosen: ``sequential`` (``k<seq % keys>``, the default),
        ``uniform``, or ``zipf`` (key ``k<i>`` with weight ``1 / (i + 1) ** zipf_s``: a few hot keys).
    :param zipf_s: the zipf exponent (> 0); larger is more skewed (1.0: ``k0`` twice as often as ``k1``).
    :param headers: extra record headers, name to value (both strings); the value-id header
        (:data:`~chaos.run.events.VALUE_ID_HEADER`) is always added.
    :param tombstones: the share of records sent with a null value (0 <= share < 1; needs keys).
    :param burst: ``(on_s, off_s)``: send at the producer's rate for ``on_s`` seconds, then nothing for
        ``off_s``, repeated.
    :param steps: ``[(rate, seconds), ...]``: the rate pattern, repeated (a rate of 0 is a pause); it
        replaces the producer's rate.
    :param seed: the seed of every draw; ``None``: the run's seed (``--chaos-seed``), else 0 — mixed with
        the producer's name either way, so two producers of one run differ and a replay sends the same.
    """

    size: int | None = None
    sizes: Any = None
    keys: int | None = 16
    key_skew: KeySkew = "sequential"
    zipf_s: float = 1.0
    headers: Any = ()
    tombstones: float = 0.0
    burst: Sequence[float] | None = None
    steps: Sequence[tuple[float, float]] | None = None
    seed: int | None = None
    _size_rows: tuple[tuple[float, int, int], ...] = field(default=(), init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.size is not None:
            if type(self.size) is not int or not 1 <= self.size <= MAX_VALUE_BYTES:
                raise ConfigError(
                    f"Traffic.size: expected a value size in bytes, 1..{MAX_VALUE_BYTES}, or None; "
                    f"got {self.size!r}"
                )
            if self.sizes is not None:
                raise ConfigError("Traffic: set size (one fixed size) or sizes (a distribution), not both")
        if self.sizes is not None:
            rows = _size_table(self.sizes)
            object.__setattr__(self, "_size_rows", rows)
            object.__setattr__(self, "sizes", _normalized_sizes(self.sizes))
        elif self.size is not None:
            object.__setattr__(self, "_size_rows", ((1.0, self.size, self.size),))
        if self.keys is not None and (type(self.keys) is not int or not 1 <= self.keys <= MAX_KEYS):
            raise ConfigError(
                f"Traffic.keys: expected the number of distinct keys, 1..{MAX_KEYS}, or None for keyless "
                f"records; got {self.keys!r}"
            )
        if self.key_skew not in KEY_SKEWS:
            raise ConfigError(
                f"Traffic.key_skew: expected one of {', '.join(KEY_SKEWS)}; got {self.key_skew!r}"
            )
        if self.keys is None and self.key_skew != "sequential":
            raise ConfigError(
                f"Traffic.key_skew={self.key_skew!r} needs keys: set keys=N, or leave key_skew out for "
                "keyless records"
            )
        if self.key_skew == "zipf" and self.keys is not None and self.keys > MAX_ZIPF_KEYS:
            raise ConfigError(
                f"Traffic.keys: a zipf key choice takes at most {MAX_ZIPF_KEYS} keys; got {self.keys}"
            )
        if not _is_number(self.zipf_s) or not self.zipf_s > 0:
            raise ConfigError(
                f"Traffic.zipf_s: expected an exponent > 0 (1.0 is classic zipf); got {self.zipf_s!r}"
            )
        object.__setattr__(self, "headers", _headers(self.headers))
        if not _is_number(self.tombstones) or not 0.0 <= self.tombstones < 1.0:
            raise ConfigError(
                f"Traffic.tombstones: expected the share of null-value records, 0 <= share < 1; "
                f"got {self.tombstones!r}"
            )
        if self.tombstones and self.keys is None:
            raise ConfigError(
                "Traffic.tombstones: a tombstone deletes a key, and these records are keyless: set keys=N "
                "(a compacted topic needs keys), or tombstones=0"
            )
        if self.burst is not None and self.steps is not None:
            raise ConfigError("Traffic: set burst=(on_s, off_s) or steps=[(rate, seconds), ...], not both")
        if self.burst is not None:
            burst = tuple(self.burst) if isinstance(self.burst, Sequence) else ()
            if len(burst) != 2 or not all(_is_number(s) and s > 0 for s in burst):
                raise ConfigError(
                    f"Traffic.burst: expected (on_s, off_s), both seconds > 0; got {self.burst!r}"
                )
            object.__setattr__(self, "burst", (float(burst[0]), float(burst[1])))
        if self.steps is not None:
            object.__setattr__(self, "steps", _steps(self.steps))
        if self.seed is not None and type(self.seed) is not int:
            raise ConfigError(f"Traffic.seed: expected an int, or None for the run's seed; got {self.seed!r}")

    def pattern(self, rate: float | None) -> RatePattern | None:
        """The rate pattern at the producer's ``rate``; ``None``: a steady ``rate``."""
        if self.steps is not None:
            return RatePattern(self.steps)
        if self.burst is not None:
            if rate is None:
                raise ConfigError(
                    "Traffic.burst sends at the producer's rate while on: give the producer a rate "
                    "(rate=..., not None), or describe the pattern with steps=[(rate, seconds), ...]"
                )
            on_s, off_s = self.burst
            return RatePattern(((rate, on_s), (0.0, off_s)))
        return None

    def shape(self, producer: str, run_seed: int | None) -> TrafficShape:
        """This traffic for producer ``producer``, its draws seeded by :attr:`seed`, else ``run_seed``."""
        base = self.seed if self.seed is not None else (run_seed if run_seed is not None else 0)
        return TrafficShape(self, producer_seed(base, producer))

    def to_data(self) -> dict[str, Any]:
        """As JSON data (a child process's spec): :meth:`from_data` reads it back."""
        return {
            "size": self.size,
            "sizes": _as_lists(self.sizes),
            "keys": self.keys,
            "key_skew": self.key_skew,
            "zipf_s": self.zipf_s,
            "headers": [list(h) for h in self.headers],
            "tombstones": self.tombstones,
            "burst": list(self.burst) if self.burst is not None else None,
            "steps": _as_lists(self.steps),
            "seed": self.seed,
        }

    @classmethod
    def from_data(cls, data: Mapping[str, Any]) -> Traffic:
        sizes = data.get("sizes")
        if isinstance(sizes, list) and sizes and isinstance(sizes[0], list):
            sizes = tuple(tuple(p) for p in sizes)
        elif isinstance(sizes, list):
            sizes = tuple(sizes)
        steps = data.get("steps")
        return cls(
            size=data.get("size"),
            sizes=sizes,
            keys=data.get("keys"),
            key_skew=data.get("key_skew", "sequential"),
            zipf_s=data.get("zipf_s", 1.0),
            headers=tuple(tuple(h) for h in data.get("headers", ())),
            tombstones=data.get("tombstones", 0.0),
            burst=tuple(data["burst"]) if data.get("burst") is not None else None,
            steps=tuple(tuple(s) for s in steps) if steps is not None else None,
            seed=data.get("seed"),
        )


def _as_lists(value: Any) -> Any:
    if isinstance(value, tuple):
        return [_as_lists(v) for v in value]
    return value


def _normalized_sizes(sizes: Sequence[Any]) -> tuple[Any, ...]:
    if len(sizes) == 2 and all(type(s) is int for s in sizes):
        return tuple(sizes)
    return tuple((int(p[0]), float(p[1])) for p in sizes)


def _headers(headers: object) -> tuple[tuple[str, str], ...]:
    fix = "expected a mapping of header name to value, both strings, e.g. {'source': 'billing'}"
    items: Sequence[Any]
    if isinstance(headers, Mapping):
        items = list(headers.items())
    elif isinstance(headers, Sequence) and not isinstance(headers, str | bytes):
        items = list(headers)
    else:
        raise ConfigError(f"Traffic.headers: {fix}; got {headers!r}")
    result: list[tuple[str, str]] = []
    for item in items:
        if (
            not isinstance(item, Sequence)
            or len(item) != 2
            or not isinstance(item[0], str)
            or not item[0]
            or not isinstance(item[1], str)
        ):
            raise ConfigError(f"Traffic.headers: {fix}; got {item!r}")
        if item[0] == VALUE_ID_HEADER:
            raise ConfigError(
                f"Traffic.headers: {VALUE_ID_HEADER!r} is the harness's own header (each record's value id); "
                "name yours otherwise"
            )
        result.append((item[0], item[1]))
    names = [n for n, _ in result]
    if len(set(names)) != len(names):
        raise ConfigError(f"Traffic.headers: a header name given twice in {headers!r}")
    return tuple(result)


def _steps(steps: object) -> tuple[tuple[float, float], ...]:
    fix = "expected [(rate, seconds), ...]: rates in messages/s >= 0 (0: a pause), seconds > 0, some rate > 0"
    if not isinstance(steps, Sequence) or isinstance(steps, str | bytes) or not steps:
        raise ConfigError(f"Traffic.steps: {fix}; got {steps!r}")
    result: list[tuple[float, float]] = []
    for step in steps:
        if (
            not isinstance(step, Sequence)
            or len(step) != 2
            or not all(_is_number(x) for x in step)
            or step[0] < 0
            or not step[1] > 0
        ):
            raise ConfigError(f"Traffic.steps: {fix}; got the step {step!r}")
        result.append((float(step[0]), float(step[1])))
    if not any(rate > 0 for rate, _ in result):
        raise ConfigError(f"Traffic.steps: {fix}; every rate of {steps!r} is 0: nothing would be sent")
    return tuple(result)


class RatePattern:
    """A repeated sequence of ``(rate, seconds)`` steps: when the n-th send of a session is due."""

    def __init__(self, steps: Sequence[tuple[float, float]]) -> None:
        self.steps = tuple(steps)
        self.cycle_s = sum(s for _, s in self.steps)
        self.cycle_sends = sum(r * s for r, s in self.steps)

    def due(self, n: int) -> float:
        """Seconds after the start at which send ``n`` (0 = the first) is due: where the rate's integral
        reaches ``n``."""
        cycles = math.floor(n / self.cycle_sends)
        rest = n - cycles * self.cycle_sends
        at = cycles * self.cycle_s
        for rate, seconds in self.steps:
            sends = rate * seconds
            if rate > 0 and rest < sends:
                return at + rest / rate
            rest -= sends
            at += seconds
        return at  # rounding left a hair past the cycle: the next cycle's start

    def rate_at(self, t: float) -> float:
        """The rate in force ``t`` seconds after the start."""
        t = t % self.cycle_s
        for rate, seconds in self.steps:
            if t < seconds:
                return rate
            t -= seconds
        return self.steps[-1][0]


@dataclass(frozen=True)
class ShapedRecord:
    """One record as a shaped producer sends it: key, value (``None``: a tombstone) and headers."""

    key: str | None
    value: bytes | None
    headers: tuple[Header, ...]

    @property
    def tombstone(self) -> bool:
        return self.value is None


class TrafficShape:
    """:class:`Traffic` resolved for one producer and seed: :meth:`record` builds sequence ``seq``'s
    record."""

    def __init__(self, traffic: Traffic, seed: int) -> None:
        self.traffic = traffic
        self.seed = seed
        self._extra: tuple[Header, ...] = tuple((k, v.encode()) for k, v in traffic.headers)
        self._sizes = traffic._size_rows
        self._size_cum = [row[0] for row in self._sizes]
        self._key_cum: list[float] = []
        if traffic.key_skew == "zipf" and traffic.keys is not None:
            weights = [1.0 / (i + 1) ** traffic.zipf_s for i in range(traffic.keys)]
            total = math.fsum(weights)
            running = 0.0
            for w in weights:
                running += w
                self._key_cum.append(running / total)

    def key(self, seq: int) -> str | None:
        keys = self.traffic.keys
        if keys is None:
            return None
        skew = self.traffic.key_skew
        if skew == "sequential":
            return f"k{seq % keys}"
        u = unit(self.seed, seq, _STREAM_KEY)
        if skew == "uniform":
            return f"k{min(int(u * keys), keys - 1)}"
        return f"k{min(bisect.bisect_right(self._key_cum, u), keys - 1)}"

    def tombstone(self, seq: int) -> bool:
        share = self.traffic.tombstones
        return bool(share) and unit(self.seed, seq, _STREAM_TOMBSTONE) < share

    def size(self, seq: int) -> int | None:
        """The wanted value size of ``seq`` in bytes; ``None``: no padding."""
        if not self._sizes:
            return None
        u = unit(self.seed, seq, _STREAM_SIZE)
        row = min(bisect.bisect_right(self._size_cum, u), len(self._sizes) - 1)
        _, lo, hi = self._sizes[row]
        if lo == hi:
            return lo
        # the draw's position inside its row, spread over lo..hi
        start = self._size_cum[row - 1] if row else 0.0
        within = (u - start) / (self._size_cum[row] - start)
        return lo + min(int(within * (hi - lo + 1)), hi - lo)

    def value(self, seq: int, value_id: str) -> bytes:
        """``value_id``, then ``|`` and padding to :meth:`size` bytes (never shorter than ``id|``)."""
        head = value_id.encode()
        size = self.size(seq)
        if size is None:
            return head
        need = max(size - len(head) - 1, 0)
        return head + b"|" + _padding(need, seq)

    def record(self, seq: int, value_id: str) -> ShapedRecord:
        headers = (*self._extra, (VALUE_ID_HEADER, value_id.encode()))
        value = None if self.tombstone(seq) else self.value(seq, value_id)
        return ShapedRecord(self.key(seq), value, headers)


def _padding(need: int, seq: int) -> bytes:
    offset = seq % len(_PAD_BLOCK)
    if need <= len(_PAD_BLOCK):
        return _PAD_TWICE[offset : offset + need]
    return (_PAD_BLOCK * (need // len(_PAD_BLOCK) + 2))[offset : offset + need]
