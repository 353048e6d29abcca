"""The size knob of the encoders' shared pretoken cache (the cache itself is C, in
``_shared_cache.h``, used by ``fastbpe._encode``).

Every native BPE encoder keeps one table of chunk bytes -> token ids that all its calls
and threads share, behind each thread's small private chunk cache. Its size is fixed
when the encoder is built:

- ``DEFAULT_MB`` (16 MiB: 262,144 chunks of up to 24 bytes and 8 tokens), or
- ``$FASTBPE_SHARED_CACHE_MB`` (a number of MiB; ``0`` turns the table off), or
- ``set_default_bytes(n)`` for encoders built afterwards in this process.

The pages are faulted in when the encoder is built (about 3 ms for 16 MiB), not
while it encodes: a table read at random faults nearly all of its pages within the
first megabytes of text.

>>> old = set_default_bytes(1 << 20)
>>> default_bytes() == 1 << 20
True
>>> set_default_bytes(old) == 1 << 20
True
"""
import os as _os

DEFAULT_MB = 16

cdef object _override = None


cpdef size_t default_bytes():
    """Bytes of the table of an encoder built now (see the module docstring)."""
    if _override is not None:
        return _override
    env = _os.environ.get("FASTBPE_SHARED_CACHE_MB")
    if env is not None and env.strip():
        try:
            mb = float(env)
        except ValueError:
            raise ValueError(f"FASTBPE_SHARED_CACHE_MB must be a number of MiB, not {env!r}") from None
        if not 0 <= mb <= 1 << 20:
            raise ValueError(f"FASTBPE_SHARED_CACHE_MB must be between 0 and {1 << 20}, not {env!r}")
        return <size_t>(mb * (1 << 20))
    return DEFAULT_MB << 20


def set_default_bytes(n):
    """Set the table size (bytes; 0: none) of encoders built from now on, or None to go
    back to the environment and DEFAULT_MB. Returns the previous setting's bytes."""
    global _override
    old = default_bytes()
    if n is not None:
        if isinstance(n, bool) or not isinstance(n, int):
            raise TypeError(f"n must be an int number of bytes or None, not {type(n).__name__}")
        if n < 0:
            raise ValueError(f"n must be >= 0, not {n}")
    _override = n
    return old
