/* One build of the three patterns' window rules: included by _split_fill.h only, once
 * per build after the first (the SSE2 build with three-byte chars, under the files' own
 * names), with FBPE_O200K_NAME, FBPE_CL100K_NAME and FBPE_GPT2_NAME naming its
 * functions, and fbpe_win_bytes and FBPE_LEAD3 defined as that build wants them
 * (_split_fill.h says which builds there are and why).
 */
#define fbpe_o200k_starts FBPE_O200K_NAME
#define fbpe_cl100k_starts FBPE_CL100K_NAME
#define fbpe_gpt2_starts FBPE_GPT2_NAME
#undef FASTBPE_SPLIT_O200K_H
#undef FASTBPE_SPLIT_CL100K_H
#undef FASTBPE_SPLIT_GPT2_H
#include "_split_o200k.h"
#include "_split_cl100k.h"
#include "_split_gpt2.h"
#undef fbpe_o200k_starts
#undef fbpe_cl100k_starts
#undef fbpe_gpt2_starts
#undef FBPE_O200K_NAME
#undef FBPE_CL100K_NAME
#undef FBPE_GPT2_NAME
