/* A split program's scan of one segment (fastbpe._split_program, program_chunk_end_scan):
   for each outer level of a sequence program (HF's Isolated Splits in a Sequence), the
   piece found last and the segment end it was found within, so that a chunk loop over
   the segment scans a long piece once, not once per chunk in it. Kept by every chunk
   loop in its FbpeWin (_split_fast.h), reset with it before a segment's first chunk. */
#ifndef FASTBPE_FBE_PROGRAM_SCAN_H
#define FASTBPE_FBE_PROGRAM_SCAN_H

#define FBPE_PROGRAM_LEVELS 8

typedef struct {
    Py_ssize_t bound[FBPE_PROGRAM_LEVELS];  /* the end the level's piece was found within (-1: none) */
    Py_ssize_t end[FBPE_PROGRAM_LEVELS];    /* where that piece ends */
} FbpeProgramScan;

/* Nothing found yet: no bound equals a segment end. */
static inline void fbpe_program_scan_reset(FbpeProgramScan *scan) {
    int i;
    for (i = 0; i < FBPE_PROGRAM_LEVELS; i++) scan->bound[i] = -1;
}
#endif /* FASTBPE_FBE_PROGRAM_SCAN_H */
