"""The knobs of the native trainers, one struct per trainer, held by each trainer object
instead of read from module globals.

Each trainer module keeps a process default (``fastbpe._train`` for ``TrainTuning``,
``fastbpe._wordpiece_train`` for ``WordPieceTrainTuning``); every trainer object copies
it when it is constructed, and its methods read their own copy, so a change of the
default reaches only the objects made after it (tests change it through ``_set_limits``
and ``_set_housekeeping``). The error messages of the limits print the copy that was
checked.

No field changes a merge, an id or a count: the limits are what the 32-bit fields of
the tables allow (a run that reaches one fails with a ValueError naming it, it never
trains differently), and the housekeeping thresholds only say how often dead entries
are swept. The defaults are the widest the fields allow; tests lower the limits to
reach the real checks (a corpus of 2**31 unique chunks can't be built in a test) and
set the thresholds to 0 to sweep after every merge.

Two structs, not one: the two trainers share no field. WordPiece's pair ids are never
reused and its words are whole words, while BPE recycles dead pair slots and counts
chunks; one struct would hold fields that one trainer ignores, and a test lowering a
limit of one trainer would change the other's.

Header only (no module): the structs are plain C; the defaults live in the modules.
"""


cdef struct TrainTuning:
    # BPE (fastbpe._train: _ChunkTable, _Merger)
    #
    # Unique chunks (counting tables and the merger's words): their numbers and the
    # word ids are int32. Default 2**31 - 2.
    Py_ssize_t max_chunks
    # Bytes of one chunk: word lengths are int32 (a chunk is one pre-tokenizer piece,
    # so in practice far shorter). Default 2**31 - 2.
    Py_ssize_t max_chunk_bytes
    # Pair slots ever in use at once (dead slots are recycled): slots are int32.
    # Default 2**31 - 1.
    Py_ssize_t max_pairs
    # Entries of the word-list pool (pair -> words holding it): offsets are uint32.
    # Default 2**32 - 2.
    Py_ssize_t max_pool
    # Compact the word-list pool once more than this many entries are abandoned (and
    # they are a third of it): small pools are never worth the copy. Default 4096.
    Py_ssize_t pool_min_waste
    # Rebuild the heap once it holds more than 2 * live pairs + this many entries
    # (stale ones are dropped lazily anyway; this bounds its memory). Default 4096.
    Py_ssize_t heap_slack


cdef struct WordPieceTrainTuning:
    # WordPiece (fastbpe._wordpiece_train.Trainer)
    #
    # Pairs ever made: pair ids are int32 and never reused (every pair keeps its id),
    # so a long run on a big corpus can reach it. Default 2**31 - 1.
    Py_ssize_t max_pairs
    # Unique words of the corpus: word ids are int32. Default 2**31 - 2.
    Py_ssize_t max_words
