"""Split programs, natively: the matcher of ``fastbpe.reference.split_program``.

``program_slot(pattern)`` compiles a split pattern with the reference compiler (which
refuses what it cannot prove equal to ``regex``) and copies the program into C arrays
in a slot of a process-wide table; ``program_chunk_end`` runs it. The matcher is the
reference's ``_match`` / ``chunk_end`` line by line (Corollary 2 of that module: the
same candidates in the same order), over the same tables (Corollary 1), so a program's
chunks are ``regex.finditer``'s. Tests compare both with ``regex`` on every code point.

Data: per program, each ASCII byte's atom set (one lookup), and for other code points
a two-level table: ``stage1[cp >> 7]`` names a block of 128 class ids (uint8),
``class_atoms[id]`` is the atom set (uint32 bits). Each branch starts with the atoms
its first consumed char may be in, so the branches that cannot start on the char at p
cost one AND each. A chunk start's class id (an ASCII byte's: the byte itself) picks
its shortcut (``_shortcut``: the branch certainly matches, with the first run from
there), for any char: a word starting on "ş" or "中" skips the branch loop as "s" does.
"""
from libc.stdint cimport int32_t, uint8_t, uint16_t, uint32_t, uint64_t
from libc.stdlib cimport calloc, malloc
from libc.string cimport memcpy
cimport numpy as cnp
import numpy as np

from fastbpe.reference import split_program as _ref

cnp.import_array()

# Word-at-a-time ASCII runs: a RUN whose atom's ASCII members are one byte range
# (letters with case folded, digits, a space) skips 8 ASCII bytes a step.
cdef extern from "fbe_ascii_run.h":
    Py_ssize_t fbpe_ascii_range_end(const unsigned char* t, Py_ssize_t i, Py_ssize_t end,
                                    unsigned lo, unsigned hi, unsigned fold) nogil
    enum:
        FBPE_SWAR
    int __builtin_ctzll(unsigned long long x) nogil

cdef enum:
    NO_ASCII_LO = 0x80     # an empty ASCII range: lo > every 7-bit byte
    NO_ASCII_HI = 0x7F


cdef inline Py_ssize_t _ascii_outside_end(const unsigned char* t, Py_ssize_t i, Py_ssize_t end,
                                          unsigned lo, unsigned hi) noexcept nogil:
    """End of the run from i of ASCII bytes b outside lo <= b <= hi: it stops at a byte
    in the range or >= 0x80, 8 bytes a step where fbpe_ascii_range_end does (the same
    SWAR test, the other way round). lo NO_ASCII_LO, hi NO_ASCII_HI: no byte is in
    the range, the run is every ASCII byte."""
    cdef uint64_t x, ge_lo, gt_hi, stop
    cdef uint64_t ones = 0x0101010101010101ULL, high = 0x8080808080808080ULL
    cdef unsigned b
    if FBPE_SWAR:
        while end - i >= 8:
            memcpy(&x, t + i, 8)
            ge_lo = (x & ~high) + ones * (0x80 - lo)   # high bit: b >= lo
            gt_hi = (x & ~high) + ones * (0x7F - hi)   # high bit: b > hi
            stop = ((ge_lo & ~gt_hi) | x) & high       # in the range, or not ASCII
            if stop:
                return i + (__builtin_ctzll(stop) >> 3)
            i += 8
    while i < end:
        b = t[i]
        if b >= 0x80 or (lo <= b and b <= hi):
            break
        i += 1
    return i

cdef extern from "fbe_utf8_decode.h":
    uint32_t fbe_decode_multibyte(const unsigned char* t, Py_ssize_t i, Py_ssize_t end,
                                  Py_ssize_t* width) noexcept nogil

cdef enum:
    MAX_OUTER = 8

# Item kinds: the reference's numbers.
cdef enum:
    K_RUN = 0
    K_LITS = 1
    K_AHEAD = 2
    K_NOT_AHEAD = 3
    K_DOLLAR = 4

ctypedef struct Item:
    int kind
    uint32_t mask            # RUN, AHEAD, NOT_AHEAD: the atom's bit
    int32_t lo, hi           # RUN: repetitions, hi -1 unbounded; LITS: lo 0 = optional
    int possessive
    int ascii_range          # RUN: its ASCII members are the bytes b with
    unsigned rlo, rhi, rfold #   rlo <= (b | rfold) <= rhi (fbpe_ascii_range_end)
    int rest_never_fails     # every later item of its branch has min 0 and consumes
    int32_t lit_first, lit_count  # LITS: alternatives lits[lit_first : lit_first + lit_count]

ctypedef struct Lit:
    int32_t first, length    # its chars' atom bits: lit_masks[first : first + length]

ctypedef struct Shortcut:
    # How a chunk starting on a char of one class may skip the branch loop (_shortcut).
    int kind                 # 0 none; SC_RUN; SC_PREFIX; SC_GUARD
    int32_t item, n          # the items to match from (at p, or after the first char)
    int fails_unless         # the branch fails when the shortcut's test does: the next
                             # branch that may start on the class decides (shortcut2)

cdef enum:
    SC_RUN = 1
    SC_PREFIX = 2
    SC_GUARD = 3

ctypedef struct Branch:
    uint32_t first_mask      # the atoms its first consumed char may be in
    int32_t item_first, item_count

ctypedef struct Prog:
    uint32_t ascii[128]
    # per class id (any char's, not only ASCII's: a chunk starting on a Turkish or CJK
    # letter takes the shortcut too), and the same per ASCII byte (no class lookup)
    uint8_t first_branch[256]  # the first branch that may start on a char of the class
    Shortcut shortcut[256]
    uint8_t first_branch_ascii[128]
    Shortcut shortcut_ascii[128]
    # the same from the next branch that may start on the class, for when the first
    # one's shortcut test fails and fails_unless says the branch then fails
    uint8_t first_branch2[256]
    Shortcut shortcut2[256]
    uint8_t first_branch2_ascii[128]
    Shortcut shortcut2_ascii[128]
    # A sequence of splits (compile_sequence): the levels before this one, outermost
    # first, each one run X+ / X{1,k} of its own tables (Corollary 5).
    int n_outer
    void* outer[MAX_OUTER]   # const Prog*
    uint32_t outer_mask[MAX_OUTER]
    int32_t outer_k[MAX_OUTER]  # -1: unbounded
    # the level's X holds the ASCII bytes outer_lo..outer_hi and no other (an empty
    # range when it holds none), when outer_swar: a run of non-X chars skips ASCII
    # bytes 8 a step (_ascii_outside_end)
    int outer_swar[MAX_OUTER]
    unsigned outer_lo[MAX_OUTER]
    unsigned outer_hi[MAX_OUTER]
    uint32_t class_atoms[256]
    uint16_t* stage1         # 0x110000 >> 7 entries
    uint8_t* stage2          # 128 class ids per block
    int n_branches
    Branch* branches
    Item* items
    Lit* lits
    uint32_t* lit_masks

cdef Prog* _programs[PROGRAM_SLOTS]
cdef int _n_programs = 0
#: pattern -> (slot or -1, tiles)
_slots = {}


cdef inline uint32_t _atoms_at(const Prog* g, const unsigned char* t, Py_ssize_t i,
                               Py_ssize_t end, Py_ssize_t* w) noexcept nogil:
    """The atom set of the char at byte i; its byte length to w."""
    cdef unsigned char b = t[i]
    cdef uint32_t cp
    if b < 0x80:
        w[0] = 1
        return g.ascii[b]
    cp = fbe_decode_multibyte(t, i, end, w)
    if cp > 0x10FFFF:
        return 0
    return g.class_atoms[g.stage2[(<Py_ssize_t>g.stage1[cp >> 7] << 7) | (cp & 127)]]


cdef inline Py_ssize_t _run(const Prog* g, const Item* it, const unsigned char* t,
                           Py_ssize_t q, Py_ssize_t end) noexcept nogil:
    """End of the run of it's atom from q (no maximum)."""
    cdef Py_ssize_t w
    cdef unsigned char b
    cdef uint32_t mask = it.mask
    while q < end:
        b = t[q]
        if b < 0x80:
            if it.ascii_range:
                q = fbpe_ascii_range_end(t, q, end, it.rlo, it.rhi, it.rfold)
                if q >= end or t[q] < 0x80:
                    return q
                continue
            if not (g.ascii[b] & mask):
                return q
            q += 1
        else:
            if not (_atoms_at(g, t, q, end, &w) & mask):
                return q
            q += w
    return q


cdef Py_ssize_t _match(const Prog* g, const Item* it, int n, const unsigned char* t,
                       Py_ssize_t p, Py_ssize_t end) noexcept nogil:
    """End of the first match of the n items from `it` at p, or -1 (the reference's
    _match: greedy runs give back one char at a time, possessive ones never)."""
    cdef Py_ssize_t q, w, r, qmin
    cdef int32_t count, j, a
    cdef const Lit* lit
    cdef bint ok
    if n == 0:
        return p
    if it.kind == K_RUN:
        q = p
        count = 0
        while count < it.lo:
            if q >= end or not (_atoms_at(g, t, q, end, &w) & it.mask):
                return -1
            q += w
            count += 1
        qmin = q  # backtracking gives back down to lo chars
        if it.hi < 0:
            q = _run(g, it, t, q, end)
        else:
            while q < end and count < it.hi:
                if not (_atoms_at(g, t, q, end, &w) & it.mask):
                    break
                q += w
                count += 1
        if n == 1:
            return q
        if it.possessive:
            return _match(g, it + 1, n - 1, t, q, end)
        while True:
            r = _match(g, it + 1, n - 1, t, q, end)
            if r >= 0 or q <= qmin:
                return r
            q -= 1  # back one char: the run's chars are whole UTF-8 sequences
            while q > qmin and (t[q] & 0xC0) == 0x80:
                q -= 1
    if it.kind == K_LITS:
        for j in range(it.lit_count):
            lit = &g.lits[it.lit_first + j]
            q = p
            ok = True
            for a in range(lit.length):
                if q >= end or not (_atoms_at(g, t, q, end, &w) & g.lit_masks[lit.first + a]):
                    ok = False
                    break
                q += w
            if ok:
                r = _match(g, it + 1, n - 1, t, q, end)
                if r >= 0 or it.possessive:
                    return r
        if it.lo == 0:
            return _match(g, it + 1, n - 1, t, p, end)
        return -1
    if it.kind == K_DOLLAR:
        ok = p == end or (p == end - 1 and t[p] == 10)
    else:
        ok = p < end and (_atoms_at(g, t, p, end, &w) & it.mask) != 0
        if it.kind == K_NOT_AHEAD:
            ok = not ok
    return _match(g, it + 1, n - 1, t, p, end) if ok else -1


cdef Py_ssize_t _outer_end(const Prog* g, const unsigned char* t, Py_ssize_t p,
                           Py_ssize_t end, ProgramScan* scan) noexcept nogil:
    """The end of the innermost piece that holds p, through the outer levels: each
    level's piece from p is the rest of the run of its X (at most k chars), or of
    non-X chars (Corollary 5 of fastbpe.reference.split_program). With a scan (rising
    starts), a level's run of non-X chars or unbounded X run found from an earlier
    start within the same bound is one class from that start to its end, so from any
    p before its end the rest of the run ends there too: taken, not scanned again."""
    cdef const Prog* o
    cdef Py_ssize_t q, w
    cdef uint32_t mask
    cdef int32_t count, k
    cdef int i
    cdef bint x
    for i in range(g.n_outer):
        if scan != NULL and scan.bound[i] == end and p < scan.end[i]:
            end = scan.end[i]
            continue
        o = <const Prog*>g.outer[i]
        mask = g.outer_mask[i]
        k = g.outer_k[i]
        q = p
        x = (_atoms_at(o, t, q, end, &w) & mask) != 0
        if x:
            count = 0
            while q < end and count != k and (_atoms_at(o, t, q, end, &w) & mask):
                q += w
                count += 1
        else:
            while q < end:
                if t[q] < 0x80 and g.outer_swar[i]:
                    q = _ascii_outside_end(t, q, end, g.outer_lo[i], g.outer_hi[i])
                    if q >= end or t[q] < 0x80:   # the end, or an X byte
                        break
                if _atoms_at(o, t, q, end, &w) & mask:
                    break
                q += w
        if scan != NULL:
            scan.bound[i] = end if (not x or k < 0) else -1
            scan.end[i] = q
        end = q
    return end


cdef Py_ssize_t program_chunk_end(int slot, const unsigned char* text, Py_ssize_t start,
                                  Py_ssize_t end) noexcept nogil:
    return program_chunk_end_scan(slot, text, start, end, NULL)


cdef Py_ssize_t program_chunk_end_scan(int slot, const unsigned char* text, Py_ssize_t start,
                                       Py_ssize_t end, ProgramScan* scan) noexcept nogil:
    cdef const Prog* g = _programs[slot]
    cdef const Branch* br
    cdef const Item* it
    cdef const Shortcut* sc
    cdef Py_ssize_t q = start, w, w0, r
    cdef uint32_t m, cp
    cdef const Shortcut* sc2 = NULL
    cdef int b, n, cls, fb = 0, fb2 = 0, first = -1
    if g.n_outer:
        end = _outer_end(g, text, start, end, scan)
    sc = NULL
    if text[start] < 0x80:
        w0 = 1
        sc = &g.shortcut_ascii[text[start]]
        fb = g.first_branch_ascii[text[start]]
        sc2 = &g.shortcut2_ascii[text[start]]
        fb2 = g.first_branch2_ascii[text[start]]
    else:
        cp = fbe_decode_multibyte(text, start, end, &w0)
        if cp <= 0x10FFFF:
            cls = g.stage2[(<Py_ssize_t>g.stage1[cp >> 7] << 7) | (cp & 127)]
            sc = &g.shortcut[cls]
            fb = g.first_branch[cls]
            sc2 = &g.shortcut2[cls]
            fb2 = g.first_branch2[cls]
    while sc != NULL:  # the first branch that may start here, then (sc2) the next one
        if sc.kind == SC_RUN:
            it = g.items + sc.item
            if sc.n == 1 and it.hi < 0:  # the char and the rest of the run
                return _run(g, it, text, start + w0, end)
            return _match(g, it, sc.n, text, start, end)
        if sc.kind == SC_PREFIX and start + w0 < end:
            # The branch's optional prefix takes the char; the match is its first
            # candidate when what follows certainly matches: items forced empty by the
            # next char, then a run of it whose rest cannot fail.
            m = _atoms_at(g, text, start + w0, end, &w)
            it = g.items + sc.item
            n = sc.n
            while n > 0 and it.kind == K_RUN and it.lo == 0 and not (it.mask & m):
                it += 1
                n -= 1
            if n > 0 and it.kind == K_RUN and it.lo == 1 and (it.mask & m) and it.rest_never_fails:
                if n == 1 and it.hi < 0:
                    return _run(g, it, text, start + w0 + w, end)
                return _match(g, it, n, text, start + w0, end)
        elif sc.kind == SC_GUARD:
            # One char, then a run with a minimum: the next char decides whether the
            # branch can match at all.
            m = _atoms_at(g, text, start + w0, end, &w) if start + w0 < end else 0
            it = g.items + sc.item
            if it.mask & m:
                if sc.n == 1 and it.lo == 1 and it.hi < 0:
                    return _run(g, it, text, start + w0 + w, end)
                first = fb
                break
        else:
            break
        if not sc.fails_unless:
            break
        first = fb + 1  # the branch fails here; the next one that may start here decides
        sc, fb = sc2, fb2
        sc2 = NULL
    while q < end:
        m = _atoms_at(g, text, q, end, &w)
        if first < 0:
            first = g.first_branch_ascii[text[q]] if text[q] < 0x80 else 0
        for b in range(first, g.n_branches):
            br = &g.branches[b]
            if br.first_mask & m:
                r = _match(g, g.items + br.item_first, br.item_count, text, q, end)
                if r > q:
                    return r if q == start else q
        q += w
        first = -1
    return end


# ---------------------------------------------------------------------------------------
# Registration (with the GIL).

cdef extern from "_unicode_tables.h" nogil:
    enum:
        FBPE_WS
        FBPE_N_GC
        FBPE_BLOCK_SHIFT
    const char* fbpe_gc_names[]
    const uint16_t fbpe_stage1[]
    const uint16_t fbpe_stage2[]
    const uint16_t fbpe_gc_stage1[]
    const uint8_t fbpe_gc_stage2[]

#: category_table's answer, read once
_categories = None


cdef _stage_copy(const void* data, Py_ssize_t n, dtype):
    """A numpy copy of n items of a compiled table."""
    out = np.empty(n, dtype=dtype)
    cdef cnp.ndarray a = out
    memcpy(a.data, data, n * a.itemsize)
    return out


def category_table():
    """The compiled tables' two stages, as (gc_stage1, gc_blocks, space_stage1,
    space_blocks, names): code point cp's general category is
    ``names[gc_blocks[gc_stage1[cp >> 7], cp & 127]]``, and it is in ``\\s`` iff
    ``space_blocks[space_stage1[cp >> 7], cp & 127]``. From ``_unicode_tables.h`` (read
    out of ``regex`` by ``tools/gen_unicode_tables.py``; tests compare every code point).
    Blocks, not a value per code point: a primitive's members are then one gather of
    rows (``table_primitive``), a fresh process touches ~1 MB less.

    >>> s1, blocks, _, _, names = category_table()
    >>> names[blocks[s1[ord("!") >> 7], ord("!") & 127]]
    'Po'
    """
    global _categories
    cdef Py_ssize_t n1 = 0x110000 >> FBPE_BLOCK_SHIFT, block = 1 << FBPE_BLOCK_SHIFT
    if _categories is None:
        gc1 = _stage_copy(fbpe_gc_stage1, n1, np.uint16)
        gc2 = _stage_copy(fbpe_gc_stage2, (int(gc1.max()) + 1) * block, np.uint8)
        cls1 = _stage_copy(fbpe_stage1, n1, np.uint16)
        cls2 = _stage_copy(fbpe_stage2, (int(cls1.max()) + 1) * block, np.uint16)
        names = tuple(fbpe_gc_names[k].decode("ascii") for k in range(FBPE_N_GC))
        _categories = (gc1, gc2.reshape(-1, block), cls1,
                       ((cls2 & FBPE_WS) != 0).reshape(-1, block), names)
    return _categories


def table_primitive(str text):
    """A primitive atom's code points from the compiled tables (bool per code point):
    ``\\s``, a general category (``\\p{Lu}``) or a one-letter class, the union of its
    categories (``\\p{P}``); None for any other (the reference scans it with
    ``regex``). ``_ref._atom_bits`` calls it for the programs built here: a load reads
    DeepSeek V4's \\p{N}, \\p{L}, \\p{P}, \\p{S}, \\p{M} and \\s from the tables
    instead of six scans of every code point by ``regex``.

    >>> bool(table_primitive(r"\\p{P}")[ord("!")]), table_primitive(r"\\p{Han}") is None
    (True, True)
    """
    gc1, gc_blocks, space1, space_blocks, names = category_table()
    if text == "\\s":
        return space_blocks[space1].reshape(-1)
    if not (text.startswith("\\p{") and text.endswith("}")):
        return None
    name = text[3:-1]
    if name in names:
        codes = [names.index(name)]
    elif len(name) == 1:
        codes = [k for k, n in enumerate(names) if n[0] == name]
    else:
        return None
    if not codes:
        return None
    wanted = np.zeros(256, dtype=bool)
    wanted[codes] = True
    return wanted[gc_blocks][gc1].reshape(-1)

cdef void* _copy(arr, Py_ssize_t itemsize) except NULL:
    cdef cnp.ndarray a = np.ascontiguousarray(arr)
    cdef Py_ssize_t size = a.shape[0] * itemsize
    cdef void* out = malloc(size if size else 1)
    if out == NULL:
        raise MemoryError()
    memcpy(out, a.data, size)
    return out


cdef Prog* _build(prog) except NULL:
    """The C form of a reference Program (never freed: a slot lives as long as the
    process)."""
    stage1, stage2, class_atoms, ascii_atoms = _ref.class_tables(prog.atoms, table_primitive)
    items, lits, lit_masks, branches = [], [], [], []
    for first, branch in zip(prog.first_masks(), prog.branches):
        branches.append((first, len(items), len(branch)))
        for j, it in enumerate(branch):
            items.append((it.kind, all(r.never_fails for r in branch[j + 1:]), (1 << it.atom) if it.atom >= 0 else 0, it.lo, it.hi,
                          int(it.possessive), len(lits), len(it.lits),
                          _ascii_range(ascii_atoms, it) if it.kind == K_RUN else None))
            for lit in it.lits:
                lits.append((len(lit_masks), len(lit)))
                lit_masks.extend(1 << a for a in lit)
    cdef Prog* g = <Prog*>calloc(1, sizeof(Prog))
    if g == NULL:
        raise MemoryError()
    cdef int k
    for k in range(128):
        g.ascii[k] = ascii_atoms[k]
    for k in range(len(class_atoms)):
        g.class_atoms[k] = class_atoms[k]
    g.stage1 = <uint16_t*>_copy(stage1.astype(np.uint16), 2)
    g.stage2 = <uint8_t*>_copy(stage2.astype(np.uint8), 1)
    g.lit_masks = <uint32_t*>_copy(np.array(lit_masks, dtype=np.uint32), 4)
    g.items = <Item*>calloc(len(items) + 1, sizeof(Item))
    g.lits = <Lit*>calloc(len(lits) + 1, sizeof(Lit))
    g.branches = <Branch*>calloc(len(branches) + 1, sizeof(Branch))
    if g.items == NULL or g.lits == NULL or g.branches == NULL:
        raise MemoryError()
    for k, (kind, rest_ok, mask, lo, hi, poss, lit_first, lit_count, rng) in enumerate(items):
        g.items[k].rest_never_fails = rest_ok
        if rng is not None:
            g.items[k].ascii_range = 1
            g.items[k].rlo, g.items[k].rhi, g.items[k].rfold = rng
        g.items[k].kind = kind
        g.items[k].mask = mask
        g.items[k].lo = lo
        g.items[k].hi = hi
        g.items[k].possessive = poss
        g.items[k].lit_first = lit_first
        g.items[k].lit_count = lit_count
    for k, (first, length) in enumerate(lits):
        g.lits[k].first = first
        g.lits[k].length = length
    for k, (first_mask, item_first, item_count) in enumerate(branches):
        g.branches[k].first_mask = first_mask
        g.branches[k].item_first = item_first
        g.branches[k].item_count = item_count
    g.n_branches = len(branches)
    for k in range(len(class_atoms)):
        atoms = int(class_atoms[k])
        starts = [b for b, (first, _, _) in enumerate(branches) if first & atoms] + [len(branches)] * 2
        g.first_branch[k], g.first_branch2[k] = starts[0], starts[1]
        _fill_shortcut(&g.shortcut[k], prog, branches, starts[0], atoms)
        _fill_shortcut(&g.shortcut2[k], prog, branches, starts[1], atoms)
    class_of = {atoms: k for k, atoms in enumerate(class_atoms.tolist())}   # unique
    for k in range(128):
        cls = class_of[int(ascii_atoms[k])]   # a dict, not 128 np.searchsorted calls (~5 ms)
        g.first_branch_ascii[k] = g.first_branch[cls]
        g.shortcut_ascii[k] = g.shortcut[cls]
        g.first_branch2_ascii[k] = g.first_branch2[cls]
        g.shortcut2_ascii[k] = g.shortcut2[cls]
    return g


cdef int _fill_shortcut(Shortcut* sc, prog, list branches, int fb, atoms) except -1:
    """The shortcut of a chunk start with atom set `atoms` at branch fb (_shortcut)."""
    kind, item, n = _shortcut(prog, fb, atoms)
    sc.fails_unless = kind == SC_GUARD or (kind == SC_PREFIX and _fails_unless(prog.branches[fb], atoms))
    sc.kind = kind
    sc.item = branches[fb][1] + item if kind else 0
    sc.n = n
    return 0


def _fails_unless(items, atoms):
    """For an SC_PREFIX branch and a first char with atom set `atoms`: does the branch
    fail whenever the shortcut's test fails? True when items[1] is a run with min 1 that
    does not hold the char, followed by items that cannot fail: with the prefix, the
    match needs the next char in items[1] (the test); without it, the char itself, which
    is not."""
    it = items[1]
    return (it.kind == K_RUN and it.lo == 1 and not atoms >> it.atom & 1
            and all(r.never_fails for r in items[2:]))


def _shortcut(prog, branch, atoms):
    """For a chunk starting on a char with atom set `atoms`, whose first possible
    branch is `branch` (no earlier one can start on it):

    SC_RUN, k, n: the leading items before k are runs with min 0 the char is not in
    (they match nothing, with nothing to give back) and item k is a run with min 1 that
    holds the char, followed by items that cannot fail: the branch certainly matches,
    and its match is items[k:]'s at p.
    SC_PREFIX, 1, n: item 0 is an optional one-char run holding the char (a prefix);
    the match is the prefix and items[1:]'s match at p + 1 whenever the caller sees that
    items[1:] certainly match there (the same test at p + 1, at run time).
    SC_GUARD, 1, n: item 0 is exactly one char holding it, item 1 a run with a minimum
    (DeepSeek's ``[!"#...][A-Za-z]+``): the branch fails unless the next char is in
    item 1's atom (then the next branch's shortcut applies); with it, and items[1:] one
    unbounded run of min 1, the match is that run from the next char.
    (0, 0, 0): none of these; the branch loop decides.
    """
    if branch >= len(prog.branches):
        return 0, 0, 0
    items = prog.branches[branch]
    k = 0
    while k < len(items) and items[k].kind == K_RUN and items[k].lo == 0 \
            and not atoms >> items[k].atom & 1:
        k += 1
    if k < len(items):
        it = items[k]
        if (it.kind == K_RUN and it.lo == 1 and atoms >> it.atom & 1
                and all(r.never_fails for r in items[k + 1:])):
            return SC_RUN, k, len(items) - k
    it = items[0]
    if it.kind == K_RUN and it.lo == 0 and it.hi == 1 and atoms >> it.atom & 1 and len(items) > 1:
        return SC_PREFIX, 1, len(items) - 1
    if (it.kind == K_RUN and it.lo == 1 and it.hi == 1 and atoms >> it.atom & 1 and len(items) > 1
            and items[1].kind == K_RUN and items[1].lo >= 1):
        return SC_GUARD, 1, len(items) - 1
    return 0, 0, 0


def _ascii_range(ascii_atoms, item):
    """(lo, hi, fold) when the ASCII members of item's atom are the bytes b with
    lo <= (b | fold) <= hi, else None."""
    members = [b for b in range(128) if ascii_atoms[b] >> item.atom & 1]
    for fold in (0, 0x20):
        folded = [b | fold for b in members]
        if folded:
            lo, hi = min(folded), max(folded)
            if members == [b for b in range(128) if lo <= (b | fold) <= hi]:
                return lo, hi, fold
    return None


cdef int _new_slot(Prog* g) except -1:
    global _n_programs
    if _n_programs == PROGRAM_SLOTS:
        return -1  # slots are never freed: the pattern stays on regex
    _programs[_n_programs] = g
    _n_programs += 1
    return _n_programs - 1


def sequence_slot(tuple patterns):
    """The slot of a sequence of Isolated splits (HF's Sequence of Split, text between
    matches kept), or -1 when it runs on ``regex`` (``compile_sequence`` refuses it).

    >>> sequence_slot((r"\\p{N}{1,3}", r"\\p{L}+|\\s+")) >= 0
    True
    >>> sequence_slot((r"\\p{N}{1,3}", r"\\p{L}+|\\P{L}"))  # \\P{L} splits "123"
    -1
    """
    entry = _slots.get(patterns)
    if entry is None:
        try:
            progs = _ref.compile_sequence(patterns, table_primitive)
        except ValueError:
            entry = (-1, False)
        else:
            n = len(progs) - 1  # the last level's index (no negative indexing here)
            if n > MAX_OUTER:
                return -1
            g = _build(progs[n])
            for i, prog in enumerate(progs[:n]):
                atom, k = _ref.outer_level(prog)
                g.outer[i] = _build(prog)
                g.outer_mask[i] = 1 << atom
                g.outer_k[i] = k
                members = [b for b in range(128) if (<Prog*>g.outer[i]).ascii[b] >> atom & 1]
                lo, hi = (min(members), max(members)) if members else (NO_ASCII_LO, NO_ASCII_HI)
                g.outer_swar[i] = members == list(range(lo, hi + 1))
                g.outer_lo[i], g.outer_hi[i] = lo, hi
            g.n_outer = n
            entry = (_new_slot(g), True)
        _slots[patterns] = entry
    return entry[0]


def program_slot(str pattern, bint gaps=False):
    """The slot of pattern's program, or -1 when it runs on ``regex``: the compiler
    refuses it, the table is full, or it does not tile and ``gaps`` is false (tiktoken
    drops unmatched text; only HF's Isolated Split keeps it as chunks).

    >>> program_slot(r"\\p{L}+?")
    -1
    """
    entry = _slots.get(pattern)
    if entry is None:
        try:
            prog = _ref.compile_program(pattern, table_primitive)
        except ValueError:  # Unsupported, or not a regex at all (callers' regex says why)
            entry = (-1, False)
        else:
            entry = (_new_slot(_build(prog)), prog.tiles)
        _slots[pattern] = entry
    slot, tiles = entry
    return slot if (tiles or gaps) else -1
