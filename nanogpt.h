/* nanogpt.h - train GPT-2 in C on one GPU (or the CPU) without ever running out of memory.
 *
 * nanogpt measures the memory it may use, plans every byte of a training run before it starts (choosing
 * the micro-batch and gradient accumulation that keep the tokens per step you asked for), allocates one
 * arena, and allocates nothing while training. The model is GPT-2 exactly as nanoGPT defines it.
 *
 * Build (CPU only, one line; add nanogpt.cu with nvcc and -DNGPT_CUDA for the GPU backend). nanogpt.c is C11;
 * this header is C99 and C++:
 *     cc -std=c11 -O3 -march=native -DNGPT_NO_MAIN -c nanogpt.c && cc your_program.c nanogpt.o -lm -lpthread
 * or just ./build.sh, which builds the `nanogpt` program.
 *
 * Compile-time options:
 *     NGPT_NO_MAIN   leave out main() (for embedding nanogpt.c and for the tests)
 *     NGPT_CUDA      link the CUDA backend from nanogpt.cu (build.sh sets it when nvcc is found)
 *
 * Example: train the model a config file describes, through the library, then sample from it. The config
 * reads data/shakespeare_char/ (dataset = shakespeare_char), made once from a text file by ngpt_prepare
 * (the library reads prepared data only; `nanogpt train` prepares the recipes' data by itself).
 *
 *     char err[512];
 *     if (ngpt_prepare("input.txt", "data/shakespeare_char", NULL, 0.1, err, sizeof err)) { puts(err); return 1; }
 *     ngpt_config cfg;
 *     ngpt_config_defaults(&cfg);
 *     if (ngpt_config_load(&cfg, "data/shakespeare_char/train_cpu.cfg", err, sizeof err) ||
 *         ngpt_config_set(&cfg, "max_iters", "100", err, sizeof err)) { puts(err); return 1; }
 *     ngpt_trainer *tr;
 *     if (ngpt_trainer_create(&cfg, NULL, &tr, err, sizeof err)) { puts(err); return 1; }
 *     for (int it = 0; it < cfg.max_iters; it++) {
 *         float loss;
 *         if (ngpt_train_step(tr, &loss)) { puts(ngpt_last_error(tr)); break; }
 *     }
 *     int32_t prompt[1], ids[1 + 200];
 *     char text[4 * 201];
 *     size_t n, len;
 *     if (!ngpt_chars_encode(tr, "\n", 1, prompt, 1, &n) && !ngpt_sample(tr, prompt, 1, 1, 200, 0.8f, 200, 1337, ids) &&
 *         !ngpt_chars_decode(tr, ids, 201, text, sizeof text, &len))
 *         fwrite(text, 1, len, stdout);
 *     ngpt_trainer_free(tr);
 *
 * Error contract: every function that can fail returns an int status, 0 (NGPT_OK) on success and one of
 * the NGPT_ERR_* codes otherwise. Functions that work on a trainer keep a human-readable message in it
 * (ngpt_last_error); the others write it into the caller's buffer. The library never exits, never prints
 * unless a log callback asks for it, and keeps no mutable global state. Pointers must be valid unless a
 * comment says they may be NULL; a NULL trainer, config or output pointer is NGPT_ERR_ARG (a NULL trainer
 * has no message), not a crash (the void functions do nothing). ngpt_trainer_create checks every field of
 * the config as ngpt_config_set does, so fields set directly get the same errors.
 *
 * Dimension letters used in the comments: B batch, T time (sequence), C channels, L layers, NH heads,
 * hs head size (C / NH), V vocabulary, Vp vocabulary padded to a multiple of 64.
 */
#ifndef NANOGPT_H
#define NANOGPT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NGPT_VERSION "0.1.0"
#define NGPT_VERSION_NUMBER 100
#define NGPT_ARENA_ALIGNMENT 16 /* of the embedder's arenas (ngpt_options.device_arena, host_arena) */

/* Status codes. */
enum {
    NGPT_OK = 0,
    NGPT_ERR_ARG = 1,      /* a bad argument or configuration value */
    NGPT_ERR_IO = 2,       /* a file could not be opened, read or written */
    NGPT_ERR_FORMAT = 3,   /* a file's contents are malformed (data, tokenizer, checkpoint, weights) */
    NGPT_ERR_NOMEM = 4,    /* the plan does not fit the memory budget, or the one allocation failed */
    NGPT_ERR_DEVICE = 5,   /* a CUDA call failed, or the requested device is unavailable */
    NGPT_ERR_NUMERIC = 6,  /* NaN or Inf in the loss or the gradients */
    NGPT_ERR_STATE = 7,    /* the call does not fit the object's state */
    NGPT_ERR_INTERRUPTED = 8
};

/* A short name for a status code ("ok", "bad argument", ...). */
const char *ngpt_status_name(int status);

/* ------------------------------------------------------------------------------------------------------
 * Configuration: nanoGPT's knob names and meanings, plus nanogpt's own (marked *). Set fields directly or
 * by name with ngpt_config_set (which validates and names the valid range).
 * ---------------------------------------------------------------------------------------------------- */
typedef struct ngpt_config {
    /* I/O */
    char out_dir[256];
    int eval_interval, log_interval, eval_iters;
    int eval_only;              /* evaluate once at the model's step (a resumed one's too), save nothing, exit; a loaded
                                 * model (resume, pretrained) is planned for forward passes alone, as sample_only */
    int always_save_checkpoint; /* save at every eval, not only when val loss improves */
    int keep_checkpoints;       /* the newest ckpt_<step>.bin kept in out_dir (1..1000, default 3; the step in 9 digits,
                                 * ckpt_000000030.bin, 10 from step 1e9); best.bin besides */
    char init_from[256];        /* "scratch", "resume", "gpt2".."gpt2-xl", or a .safetensors / llm.c .bin path */
    /* data */
    char dataset[128];    /* data lives in data/<dataset>/ unless data_dir is set */
    char data_dir[256];   /* * explicit folder with train.bin, val.bin (and meta.bin) */
    char input[256];      /* * `nanogpt train` only: the text it prepares the shakespeare datasets from when their
                           * train.bin is missing (the library reads prepared data: ngpt_prepare) */
    char tokenizer_dir[256]; /* * GPT-2 vocabulary: encoder.json + vocab.bpe (or gpt2.tok, or llm.c's gpt2_tokenizer.bin) */
    char pretrained_dir[256]; /* * init_from = gpt2.. reads <pretrained_dir>/<name>/model.safetensors */
    int gradient_accumulation_steps;
    int batch_size;       /* sequences per micro-step as asked; the planner may split it */
    int block_size;       /* T */
    /* model */
    int n_layer, n_head, n_embd;
    double dropout;
    int bias;
    int vocab_size;       /* * 0 = from the dataset (meta.bin, or nanoGPT's meta.pkl), else GPT-2's 50257 */
    /* AdamW and schedule */
    double learning_rate;
    int max_iters;
    double weight_decay, beta1, beta2;
    double grad_clip;     /* 0 = no clipping */
    int decay_lr, warmup_iters, lr_decay_iters;
    double min_lr;
    /* system */
    char device[16];      /* "auto", "cpu", "cuda" (ngpt_config_set stores nanoGPT's "cuda:0" as "cuda") */
    char dtype[16];       /* "auto", "float32", "bfloat16", "float16" */
    int compile;          /* accepted for nanoGPT configs; nanogpt has nothing to compile */
    long long seed;
    /* memory plan (*) */
    double max_memory;    /* bytes; 0 = what the device has free (ngpt_config_set and config files take a size with its
                           * unit: "2.68GiB", "500MB") */
    int micro_batch;      /* 0 = the planner chooses */
    int recompute;        /* -1 = the planner chooses; 0 none, 1 GELU, 2 GELU and LayerNorm, 3 whole layers (the backward runs
                           * each layer's forward again from the kept residual stream) */
    int logits_chunk;     /* rows of logits per chunk; 0 = the planner chooses */
    char moments_dtype[16]; /* * AdamW moments: "auto" (fp32, as PyTorch's AdamW, wherever a plan fits; bf16 only where none
                             * does), "float32", or "bfloat16" (a GPU run in dtype bfloat16 or float16: half the bytes) */
    int threads;          /* CPU threads; 0 = one per core */
    char on_nonfinite[8]; /* * "skip" (default; more than 10 skipped steps in a row halt) or "halt" */
} ngpt_config;

/* nanoGPT's train.py defaults (GPT-2 124M on OpenWebText). */
void ngpt_config_defaults(ngpt_config *cfg);
/* Sets one knob from text ("batch_size", "12"; a value in quotes is read as a config file's, "'a' + 'b'" is
 * ab). An unknown key names the closest valid one; a bad value names the valid range. */
int ngpt_config_set(ngpt_config *cfg, const char *key, const char *value, char *err, size_t errlen);
/* Reads a config file of `key = value` lines (nanoGPT's config/ .py files work: # comments, quoted
 * strings joined with +, True/False, products such as 5 * 8; import lines and the values of ignored keys
 * such as wandb_run_name are skipped). Text values are quoted, as in Python (device = 'cpu'): a bare
 * word is a Python name, refused. A path that is no regular file (a pipe) is refused. Errors name the file
 * and line, and leave cfg as it was: none of the file's lines before the refused one are kept. */
int ngpt_config_load(ngpt_config *cfg, const char *path, char *err, size_t errlen);
/* Writes every knob as `key = value` lines. */
void ngpt_config_print(const ngpt_config *cfg, FILE *f);

/* ------------------------------------------------------------------------------------------------------
 * Trainer: a model, its optimizer state, its data and its one arena.
 * ---------------------------------------------------------------------------------------------------- */
typedef struct ngpt_trainer ngpt_trainer;

/* Where the library's messages go (NULL: nowhere). level 0 = info, 1 = warning. */
typedef void (*ngpt_log_fn)(void *ctx, int level, const char *line);

/* One training step or evaluation, for a live display (ngpt_train calls it after each). */
typedef struct ngpt_progress {
    int step, max_iters;       /* the step just done (nanoGPT's iter_num) and the last one */
    int is_eval;               /* 1: an evaluation at `step` (train_loss, val_loss), 0: a training step */
    float loss, lr, train_loss, val_loss;
    double step_seconds, tokens_per_second;
    double flops_per_second;   /* model FLOPs (6N + 12 L C T per token, as nanoGPT counts) per second */
    double mfu;                /* flops_per_second / the matmul peak measured at creation (ngpt_options.measure_peak);
                                * < 0 when none was measured */
    double eta_seconds;        /* until step max_iters, from the mean step time so far */
    size_t memory_bytes;       /* the arenas, device and host together (on the CPU both are host memory) */
} ngpt_progress;
typedef void (*ngpt_progress_fn)(void *ctx, const ngpt_progress *p);

typedef struct ngpt_options {
    ngpt_log_fn log;           /* messages; without `progress`, also a line every log_interval steps */
    ngpt_progress_fn progress; /* every step and evaluation */
    void *ctx;                 /* passed to both; fixed at creation, before the trainer exists: to reach the trainer
                                * from a callback (ngpt_request_stop), point it at a variable that will hold it.
                                * A callback may save, sample or ask for a stop; it must not free the trainer, and
                                * ngpt_train called from one is refused (NGPT_ERR_STATE) */
    int no_data;               /* 1: do not open the dataset (ngpt_train_step and ngpt_evaluate are refused) */
    int sample_only;           /* 1: for ngpt_sample and export only: no dataset, and memory for the parameters and
                                * a forward pass alone (no gradients, AdamW moments, fp32 master or kept
                                * activations), so a model too big to train here can still be sampled. The
                                * parameters start at zero (init_from = scratch) until loaded; ngpt_save is
                                * refused, ngpt_load reads a checkpoint's parameters only. */
    /* The embedder's own memory instead of the library's one allocation of each arena: both or neither
     * (one alone is NGPT_ERR_ARG), each aligned to NGPT_ARENA_ALIGNMENT bytes, sizes from ngpt_plan_arenas;
     * on the GPU device_arena is device memory and host_arena should be pinned. They are the memory
     * budget (on the CPU both together; on the GPU the device arena), still capped by max_memory, and each
     * part of the plan must fit its own arena: a device arena smaller than ngpt_plan_arenas said gets a
     * smaller micro-batch or more recomputation; the host arena holds the batch buffers and a fixed 4 MiB
     * of I/O staging, so one below the smallest plan's host part (or a device arena below its device
     * part) is NGPT_ERR_NOMEM, the message giving both parts of that smallest plan. The library never frees them. Beyond them,
     * creation mallocs bookkeeping (under 1 MB with the character vocabulary) and maps the token files
     * read-only (a file another program cuts short while the trainer reads it raises SIGBUS in the reading
     * thread, as with any mapped file); training, evaluation and saving allocate nothing. On the GPU, set CUDA_MODULE_LOADING=EAGER
     * in the environment before the process's first CUDA call (the nanogpt program does): CUDA's default,
     * lazy loading, takes device memory for each kernel at its first launch, in the first training step.
     * A CUDA trainer works on the device current in the thread that creates it (cudaSetDevice first picks
     * another); call it from threads where that device is current. */
    void *device_arena, *host_arena;
    size_t device_arena_bytes, host_arena_bytes;
    int measure_peak;          /* 1: at creation, time this backend's matmul on a square product in the (still zero)
                                * AdamW moments, as `nanogpt bench` does (a fraction of a second), so that progress
                                * and log.jsonl report MFU against it; the moments are zeroed again, so training is
                                * unchanged. Models whose moments cannot hold a 512^3 product get no MFU. */
} ngpt_options;

/* Resolves the device, reads the dataset, plans memory, allocates the arena once and initialises (or
 * loads) the model. After this returns, training allocates nothing. opt may be NULL. */
int ngpt_trainer_create(const ngpt_config *cfg, const ngpt_options *opt, ngpt_trainer **out, char *err, size_t errlen);
void ngpt_trainer_free(ngpt_trainer *tr);
/* The arena bytes ngpt_trainer_create would plan for cfg with opt (NULL: training; sample_only and no_data
 * shape the plan, the rest of opt is ignored) on this machine, allocating nothing. */
int ngpt_plan_arenas(const ngpt_config *cfg, const ngpt_options *opt, size_t *device_bytes, size_t *host_bytes, char *err,
                     size_t errlen);
/* The message of the last failure on this trainer. */
const char *ngpt_last_error(const ngpt_trainer *tr);

/* One optimizer step: the planned micro-steps, gradient clipping, AdamW with the scheduled learning rate.
 * *loss (may be NULL) receives the mean training loss of the step. Refused (NGPT_ERR_STATE) by a trainer
 * planned for forward passes alone (sample_only, or eval_only of a loaded model). */
int ngpt_train_step(ngpt_trainer *tr, float *loss);
/* nanoGPT's estimate_loss: mean loss over eval_iters batches of each split (dropout off); either output may
 * be NULL. */
int ngpt_evaluate(ngpt_trainer *tr, float *train_loss, float *val_loss);
/* The whole run as nanoGPT's train.py does it: evaluate every eval_interval steps, save a checkpoint in
 * out_dir when the val loss improves (or at every evaluation with always_save_checkpoint), log every
 * log_interval steps, stop after max_iters (iter_num 0 to max_iters: max_iters + 1 optimizer steps, as nanoGPT's
 * loop runs; with eval_only: one evaluation, nothing saved). Appends one
 * JSON object per step and per evaluation to out_dir/log.jsonl (eval_only into an out_dir it cannot write, or
 * of a model from elsewhere into an out_dir holding another run's checkpoints, runs unlogged, and its log
 * callback says so). It refuses (NGPT_ERR_ARG, before any step):
 * - a trainer that is not a resume, when out_dir holds another run's checkpoints (at its creation, or saved
 *   since): its saves would replace that run's best.bin and prune its checkpoints;
 * - a resume, when another run saved a checkpoint in out_dir after it was made (the two would mix);
 * - any trainer while another ngpt_train (of this process or another) trains into the same out_dir: it holds
 *   the folder's flock while it trains. ngpt_train_step and ngpt_save take no lock.
 * A write that a file-size limit (ulimit -f) refuses raises SIGXFSZ, which ends the process unless it is
 * ignored: the nanogpt program ignores it, so a full log or checkpoint is an error it reports; an embedder that
 * wants the same sets signal(SIGXFSZ, SIG_IGN). */
int ngpt_train(ngpt_trainer *tr);

/* Asks ngpt_train to stop at the next layer (transformer block, or logits chunk) of the micro-batch running, save a
 * checkpoint and return NGPT_ERR_INTERRUPTED. A step in progress runs to its end when more than half of its
 * micro-batches have run, or when it follows an evaluation (step % eval_interval == 0: a resume from the step
 * before would evaluate again), else it is dropped there, inside its micro-batch: the parameters, the AdamW moments and the data position stay those of the step before, which a
 * resume runs on from, drawing the dropped step's batches again (so a stop wastes at most about half a step,
 * and waits for at most about half a step, or a whole one just after an evaluation). An
 * evaluation in progress stops at its next layer too and is dropped (a resume runs it again); one that
 * has ended (a request from its progress callback) stops the run before the next step. The checkpoint is
 * saved unless out_dir's newest is of that step, nothing was trained (step 0) or the run is eval_only.
 * ngpt_train_step is not stopped.
 * Async-signal-safe: call it from a SIGINT handler, or from any thread while ngpt_train runs (it is the only
 * call that may be made concurrently: a trainer is otherwise used by one thread at a time). A handler's
 * pointer to the trainer must be cleared before ngpt_trainer_free. A request made before ngpt_train starts
 * stops it before its first step, or at its first evaluation; each return of ngpt_train uses the request up, so a later call
 * continues the run. ngpt_evaluate itself is not stopped. */
void ngpt_request_stop(ngpt_trainer *tr);
/* Writes the whole training state (config, model, step, data position, parameters, AdamW moments) as a
 * checkpoint (docs/formats.md), atomically (a new file, path.tmp.PID.K, renamed over path: two saves to one path
 * at once leave one whole checkpoint; what is at path must be a regular
 * file, a link to one, whose file is replaced and the link kept, or nothing; a device or a pipe is refused);
 * path's folder must exist. init_from = resume reads the newest
 * out_dir/ckpt_<step>.bin, the step in 9 digits (ckpt_000000030.bin, as ngpt_train names them; 10 from step
 * 1e9), else out_dir/best.bin: save under such a name for a resume to find it. ngpt_load reads any path. */
int ngpt_save(ngpt_trainer *tr, const char *path);
/* Loads a checkpoint of the same model into the trainer: parameters, moments and training state (into a
 * sample_only trainer: the parameters and the step). Every section it reads is checked (model shape,
 * checksums, values; a character model's characters against the trainer's meta.bin, as a resume checks them)
 * before any is loaded: a file that fails leaves the trainer as it was. A load starts the count of non-finite
 * steps in a row (on_nonfinite) again. */
int ngpt_load(ngpt_trainer *tr, const char *path);

/* Generates max_new tokens after the prompt for each of num_samples sequences, as nanoGPT's sample.py
 * (logits / temperature, then the top_k >= 0 most likely tokens, 0 = all; temperature 0 takes the most
 * likely token, the lowest id among equals, and draws nothing), with a KV cache. out receives
 * num_samples rows of n_prompt + max_new ids. Once a sequence fills block_size, the cache is rebuilt from
 * its last block_size/2 tokens (nanoGPT crops to the last block_size tokens at every step). The prompt, and
 * the tokens a cache is rebuilt from, go through the model as many positions at a time as the arena holds
 * (up to block_size), each new token one position; a prompt goes through once, its KV cache copied to the
 * other samples (where the backend has copy) and, when there are more samples than the arena decodes at once,
 * kept in the caches for the later rounds (unless a round rebuilt them). The KV cache lives in the arena; the
 * logits rows (Vp floats for each sample decoded at once, and one for the prompt's), the ids fed, the draws'
 * scratch (16 bytes an id of the vocabulary for each thread drawing a sample, and 4 more where the draws have
 * threads) and, on a GPU, the threads that draw (up to the config's threads, one a core by
 * default) are made for the call and freed before it returns; the CPU backend draws on its own threads, as many
 * as its ops use at the time. A step of at most half as many samples as threads splits each sample's draw between
 * them; more samples, a sample a thread. n_prompt + max_new must fit an int (NGPT_ERR_ARG otherwise). Each sample
 * draws from its own stream of (seed, its index): sample k draws the same numbers for any num_samples (its logits
 * may differ in the last bits when computed beside other samples), and the same tokens on any number of threads
 * (for logits that are not NaN). */
int ngpt_sample(ngpt_trainer *tr, const int32_t *prompt, int n_prompt, int num_samples, int max_new, float temperature, int top_k,
                uint64_t seed, int32_t *out);

/* Text to ids and back for a character-level model (its dataset's meta.bin or meta.pkl, as nanoGPT's
 * shakespeare_char), for prompts and samples. Buffers as the tokenizer's below: at most cap items written,
 * *n_out / *len_out what the whole result needs, NGPT_ERR_ARG when that is more than cap. Invalid UTF-8, a character outside
 * the vocabulary, or an id outside it is NGPT_ERR_ARG naming its position. A model of GPT-2 tokens has no
 * character vocabulary (NGPT_ERR_STATE): use ngpt_tokenizer_encode and _decode. */
int ngpt_chars_encode(ngpt_trainer *tr, const char *text, size_t len, int32_t *ids, size_t cap, size_t *n_out);
int ngpt_chars_decode(ngpt_trainer *tr, const int32_t *ids, size_t n, char *out, size_t cap, size_t *len_out);

/* What the trainer is: step, losses, plan decisions. */
typedef struct ngpt_stats {
    int step;                 /* optimizer steps done (nanoGPT's iter_num) */
    float best_val_loss;      /* lowest val loss of ngpt_train's evaluations, which decides its saves (1e9 before any;
                               * ngpt_evaluate's leave it) */
    float last_loss;          /* training loss of the last step */
    float lr;                 /* learning rate of the last step */
    int micro_batch, grad_accum, eval_micro_batch, recompute, logits_chunk;
    size_t parameters;        /* excluding the vocabulary padding */
    size_t device_bytes, host_bytes;
    double tokens_per_second; /* of the last step */
    const char *device;       /* "cpu" or "cuda" */
    int lanes;                /* parts of each micro-batch with their own buffers and gradients, run at once on the CPU (1: none) */
    int skipped_steps;        /* steps this trainer skipped for a NaN/Inf loss or gradient (on_nonfinite = skip), the
                               * parameters untouched; they count in step and toward max_iters, as torch's GradScaler's do
                               * (fp16's loss-scale overflows, skipped as GradScaler skips them, are not counted) */
} ngpt_stats;
void ngpt_get_stats(const ngpt_trainer *tr, ngpt_stats *st);

/* ------------------------------------------------------------------------------------------------------
 * Tokenizer: GPT-2's byte-level BPE.
 * Exactly the encoding of OpenAI's GPT-2 (encoder.py / tiktoken's "gpt2" = r50k_base) on every valid
 * UTF-8 text. Bytes that are not valid UTF-8 are split as the U+FFFD they would decode to, but keep their
 * own bytes, so decode(encode(x)) == x for every byte string. A tokenizer is immutable once loaded: any
 * number of threads may encode and decode with one at the same time.
 *
 * Buffers: encode and decode write at most cap items and report in *n_out / *len_out how many the whole
 * result needs; when that is more than cap they return NGPT_ERR_ARG (call with cap 0 and a NULL buffer
 * to size one). An encoding never has more ids than the text has bytes, so cap >= len always suffices. */
typedef struct ngpt_tokenizer ngpt_tokenizer;

/* Loads OpenAI's GPT-2 vocabulary: encoder.json (token -> id) and vocab.bpe (the merges, in rank order,
 * after a "#version" line). Everything is checked: a bad file gives NGPT_ERR_FORMAT naming the file,
 * line, column and byte offset, the bad value and what was expected. */
int ngpt_tokenizer_load_gpt2(const char *encoder_json, const char *vocab_bpe, ngpt_tokenizer **out, char *err,
                             size_t errlen);

/* Loads llm.c's gpt2_tokenizer.bin (versions 1 and 2): the token strings alone, from which GPT-2's merges
 * are found again (its ids are its merge ranks), so that encoding is the same as from encoder.json and
 * vocab.bpe. A file that is not such a vocabulary gives NGPT_ERR_FORMAT naming the token and its offset. */
int ngpt_tokenizer_load_llmc(const char *path, ngpt_tokenizer **out, char *err, size_t errlen);

/* Saves / loads nanogpt's compact tokenizer file (docs/formats.md): a checksummed binary image that loads
 * several times faster than the JSON. Saving writes a temporary file, fsyncs it and renames it over path (a
 * regular file, nothing, or a link to one, whose file is replaced and the link kept; a folder, a device or a
 * pipe is refused). */
int ngpt_tokenizer_save(const ngpt_tokenizer *t, const char *path, char *err, size_t errlen);
int ngpt_tokenizer_load(const char *path, ngpt_tokenizer **out, char *err, size_t errlen);

/* Encodes text[0..len) into ids[0..cap); *n_out = the number of ids of the whole encoding. With
 * allow_special nonzero, each "<|endoftext|>" in the text becomes the end-of-text id (50256); with it 0,
 * those 13 bytes are encoded as ordinary text. */
int ngpt_tokenizer_encode(const ngpt_tokenizer *t, const char *text, size_t len, int allow_special, int32_t *ids,
                          size_t cap, size_t *n_out, char *err, size_t errlen);

/* Streaming encoder for text larger than memory. Encodes the longest prefix text[0..*consumed) whose ids
 * cannot change whatever follows len, into ids[0..*n_out); the caller keeps text[*consumed..len), appends
 * more text after it and calls again; the last call passes is_last = 1 (then the text ends at len and all
 * of it is settled, unless ids ran out). The ids of all calls together are exactly encode() of the whole
 * text. A call stops early, at a pre-token boundary, when the next pre-token's ids do not fit in cap; it
 * returns NGPT_ERR_ARG only when not even the first one fits, with *consumed = 0 and *n_out = the ids it
 * needs. *consumed may be 0 when is_last is 0: the buffer holds no settled pre-token yet (one long word or
 * run of spaces, say): give it more bytes. A partial "<|endoftext|>" at the end is held back too. */
int ngpt_tokenizer_encode_chunk(const ngpt_tokenizer *t, const char *text, size_t len, int is_last,
                                int allow_special, int32_t *ids, size_t cap, size_t *n_out, size_t *consumed,
                                char *err, size_t errlen);

/* Decodes ids[0..n) into the bytes out[0..cap) (not NUL-terminated); *len_out = the bytes of the whole
 * text. An id outside 0..vocab_size-1 is NGPT_ERR_ARG naming its position. */
int ngpt_tokenizer_decode(const ngpt_tokenizer *t, const int32_t *ids, size_t n, char *out, size_t cap,
                          size_t *len_out, char *err, size_t errlen);

/* The bytes of one token (not NUL-terminated; *len gets their count), for streaming decode; NULL for an
 * id out of range. A token may hold part of a UTF-8 character. */
const char *ngpt_tokenizer_token(const ngpt_tokenizer *t, int32_t id, size_t *len);

int ngpt_tokenizer_vocab_size(const ngpt_tokenizer *t); /* V: 50257 for GPT-2 */
int32_t ngpt_tokenizer_eot(const ngpt_tokenizer *t);    /* the id of <|endoftext|> (50256), or -1 if none */
void ngpt_tokenizer_free(ngpt_tokenizer *t);

/* ------------------------------------------------------------------------------------------------------
 * Datasets: a text file into the folder a config's dataset (data/<dataset>/) or data_dir names, as
 * `nanogpt prepare` does.
 * ---------------------------------------------------------------------------------------------------- */
/* input (UTF-8 text) -> out_dir/train.bin and val.bin, nanoGPT's uint16 token files, val holding the last
 * val_fraction of the text (in (0, 1); nanoGPT's 0.1). tok NULL: characters, their vocabulary written to
 * out_dir/meta.bin (nanoGPT's shakespeare_char); else tok's GPT-2 tokens (nanoGPT's shakespeare), tok itself
 * saved beside them as out_dir/gpt2.tok (ngpt_tokenizer_save), which sample decodes with. Creates
 * out_dir; each file is written under a temporary name and renamed when whole. An input that is no regular
 * file (a pipe) is copied into out_dir first, as it is read twice; the copy has no name and goes at the end.
 * Errors name the file and position. */
int ngpt_prepare(const char *input, const char *out_dir, const ngpt_tokenizer *tok, double val_fraction, char *err, size_t errlen);

/* ------------------------------------------------------------------------------------------------------
 * The backend interface: the model graph (nanogpt.c) runs as calls to one of these. The CPU backend (fp32)
 * lives in nanogpt.c, the CUDA backend (bf16/fp16 storage, fp32 accumulation) in nanogpt.cu. It is an
 * internal interface between the two files, not a stable API: embedders use the trainer functions above.
 *
 * Conventions. Every pointer points into the backend's arena. "act" tensors (parameters, gradients,
 * activations) are stored in the backend's dtype; "f32" tensors are float. Shapes are row-major.
 * Operations are asynchronous on the GPU and report failures through the sticky `status`/`msg` pair: the
 * first failure is kept, later calls are still allowed, and the graph checks `status` after each phase.
 * Gradients of weights accumulate (+=) so micro-batches add up; gradients of activations are written
 * unless the comment says += .
 * ---------------------------------------------------------------------------------------------------- */
enum { NGPT_DTYPE_F32 = 0, NGPT_DTYPE_BF16 = 1, NGPT_DTYPE_F16 = 2 };

/* Dropout of one site: keep element i when ngpt_uniform(seed, stream, offset + i) >= p, scaling kept ones
 * by 1/(1-p). Masks are regenerated in the backward pass, never stored. For attention probabilities i is
 * ((b*NH + h)*T + t)*T + t2. The offset places a micro-batch inside its optimizer step, so the masks do
 * not depend on how the step is split into micro-batches. */
typedef struct ngpt_dropout {
    float p;          /* 0 = no dropout */
    uint64_t seed;
    uint64_t stream;  /* identifies (step, layer, site) */
    uint64_t offset;  /* index of this micro-batch's first element within the step */
} ngpt_dropout;

/* One AdamW update (decoupled weight decay, bias-corrected moments, as torch.optim.AdamW). The caller
 * computes the derived constants in double, as torch does, so every backend uses the same floats:
 *   g = grad * grad_scale; m = beta1 m + one_minus_beta1 g; v = beta2 v + one_minus_beta2 g^2;
 *   p -= lr * (m / bias_correction1 / (sqrt(v / bias_correction2) + eps) + weight_decay * p) */
typedef struct ngpt_adamw {
    float lr, beta1, beta2, one_minus_beta1, one_minus_beta2;
    float bias_correction1, bias_correction2; /* 1 - beta^t for the 1-based step t */
    float eps, weight_decay;
    float grad_scale;  /* gradients are multiplied by this first (clipping, loss-scale removal) */
    int moments_dtype; /* NGPT_DTYPE_F32 or NGPT_DTYPE_BF16 for m and v */
    /* bf16 moments round stochastically, element i with the bits of ngpt_hash(round_seed, round_stream, i) (the
     * low 16 for m, the high 16 for v): rounded to nearest, beta2 v would round back to v once 1 - beta2 is
     * under half a bf16 step (beta2 0.999: v never decays). Give each tensor of each step its own stream. */
    uint64_t round_seed, round_stream;
} ngpt_adamw;

/* The shapes a backend sizes its own scratch for (ngpt_backend.scratch_bytes). */
#define NGPT_FENCES 2 /* micro-batches in flight: the host prepares one while the device runs the other */

typedef struct ngpt_shape {
    int B, T, C, NH, L, Vp;
    int chunk;  /* rows of the logits chunk */
} ngpt_shape;

typedef struct ngpt_backend ngpt_backend;
struct ngpt_backend {
    const char *name;  /* "cpu" or "cuda" */
    int dtype;         /* storage of parameters, gradients and activations */
    void *impl;        /* the backend's private state */
    int status;        /* first failure since create (sticky), NGPT_OK when none */
    char msg[512];     /* its message: what failed, where */

    void (*destroy)(ngpt_backend *be);
    /* Memory. arena_alloc makes the single device allocation and the single host allocation (pinned on
     * the GPU) of a run; nothing else is allocated afterwards. scratch_bytes says how much device scratch
     * the backend needs for shapes s (the planner reserves it); set_scratch hands it over. More may make
     * an op faster (the CUDA attention backward on a Hopper keeps dS^T in it, for as many heads at a time
     * as fit). */
    int (*arena_alloc)(ngpt_backend *be, size_t device_bytes, void **device, size_t host_bytes, void **host);
    void (*arena_free)(ngpt_backend *be);
    size_t (*scratch_bytes)(ngpt_backend *be, const ngpt_shape *s);
    void (*set_scratch)(ngpt_backend *be, void *scratch, size_t bytes);
    /* Copies between the host arena and the device arena. upload is ordered before later operations and
     * may return before it completes (the host memory must stay unchanged until a fence recorded after it
     * has passed); download and sync wait; download_async is ordered like an operation and the host memory
     * holds the data once a fence recorded after it has passed. */
    void (*upload)(ngpt_backend *be, void *dst, const void *host_src, size_t bytes);
    void (*download)(ngpt_backend *be, void *host_dst, const void *src, size_t bytes);
    void (*download_async)(ngpt_backend *be, void *host_dst, const void *src, size_t bytes);
    /* Fences 0 .. NGPT_FENCES-1 (made when the backend is created): fence_record marks everything queued so
     * far, fence_wait blocks until that has completed (at once for a fence never recorded). */
    void (*fence_record)(ngpt_backend *be, int fence);
    void (*fence_wait)(ngpt_backend *be, int fence);
    void (*sync)(ngpt_backend *be);
    void (*zero)(ngpt_backend *be, void *dst, size_t bytes);
    /* dst = src, bytes of the device arena that do not overlap, ordered like an operation. Optional (NULL: sampling
     * feeds a prompt to each sample, rather than to one and copying its KV cache to the others). */
    void (*copy)(ngpt_backend *be, void *dst, const void *src, size_t bytes);
    /* f32 dst[i] = mean + std * N(0,1) from the counter-based generator (the same draws on every backend;
     * a GPU's logf/cosf may differ from the CPU's in the last bits) */
    void (*fill_normal)(ngpt_backend *be, float *dst, size_t n, float mean, float std, uint64_t seed, uint64_t stream);
    /* act dst = (dtype) f32 src; dst == src allowed when dtype is f32 */
    void (*cast_from_f32)(ngpt_backend *be, void *dst, const float *src, size_t n);

    /* out (B,T,C) = wte[tokens] + wpe[t] */
    void (*encoder_forward)(ngpt_backend *be, void *out, const int32_t *tokens, const void *wte, const void *wpe, int B, int T, int C);
    /* dwte (Vp,C) += , dwpe (T,C) += ; deterministic (no float atomics). The graph groups the B*T
     * positions by token id on the host: bucket k holds the positions bucket_pos[bucket_start[k] ..
     * bucket_start[k+1]-1] (ascending) of token tokens[bucket_pos[bucket_start[k]]], k < nbuckets. */
    void (*encoder_backward)(ngpt_backend *be, void *dwte, void *dwpe, const void *dout, const int32_t *tokens,
                             const int32_t *bucket_start, const int32_t *bucket_pos, int nbuckets, int B, int T, int C);
    /* out (N,C), mean (N), rstd (N) f32; b may be NULL */
    void (*layernorm_forward)(ngpt_backend *be, void *out, float *mean, float *rstd, const void *inp, const void *w, const void *b, int N, int C);
    /* dinp (N,C) += , dw (C) += , db (C) += (db NULL when there is no bias) */
    void (*layernorm_backward)(ngpt_backend *be, void *dinp, void *dw, void *db, const void *dout, const void *inp, const void *w, const float *mean, const float *rstd, int N, int C);
    /* out (N,OC) = inp (N,C) @ w (OC,C)^T + bias (OC); bias may be NULL */
    void (*matmul_forward)(ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, int N, int C, int OC);
    /* dinp (N,C) = dout (N,OC) @ w ; dw (OC,C) += dout^T @ inp ; dbias (OC) += colsum(dout) (NULL: none). dinp or dw
     * NULL: that product is not computed */
    void (*matmul_backward)(ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w, int N, int C, int OC);
    /* Optional fusions (NULL: the graph calls the ops one by one); each gives exactly the bits of the ops it
     * replaces. matmul_forward_gelu: matmul_forward into pre, then gelu_forward(act, pre).
     * matmul_backward_gelu: matmul_backward, then gelu_backward(dinp, pre, dinp) (pre: GELU's input, N x C;
     * dinp and pre are required, dw and dbias may be NULL). matmul_forward_residual: matmul_forward into a
     * temporary y, then residual_forward(out, res, y) (res: N x OC; out aliases none of inp, w, res).
     * layernorm_matmul_forward: layernorm_forward(ln, mean and rstd not kept, inp, ln_w, ln_b), then matmul_forward
     * (out, ln, w, bias), or with act matmul_forward_gelu(out, act, ln, w, bias); ln (N x C) may be left unwritten. */
    void (*matmul_forward_gelu)(ngpt_backend *be, void *pre, void *act, const void *inp, const void *w, const void *bias, int N, int C, int OC);
    void (*matmul_backward_gelu)(ngpt_backend *be, void *dinp, void *dw, void *dbias, const void *dout, const void *inp, const void *w,
                                 const void *pre, int N, int C, int OC);
    void (*matmul_forward_residual)(ngpt_backend *be, void *out, const void *inp, const void *w, const void *bias, const void *res, int N, int C,
                                    int OC);
    void (*layernorm_matmul_forward)(ngpt_backend *be, void *out, void *act, void *ln, const void *inp, const void *ln_w, const void *ln_b,
                                     const void *w, const void *bias, int N, int C, int OC);
    /* causal self-attention. qkv (B,T,3C) holds q,k,v, each split in NH heads of hs = C/NH channels.
     * out (B,T,C); lse (B,NH,T) f32 = log-sum-exp of each row of scaled scores (saved for backward). */
    void (*attention_forward)(ngpt_backend *be, void *out, float *lse, const void *qkv, int B, int T, int C, int NH, const ngpt_dropout *drop);
    /* dqkv (B,T,3C) = gradient of the attention above, from dout, qkv, out and lse; the T x T matrix is
     * never stored */
    void (*attention_backward)(ngpt_backend *be, void *dqkv, const void *dout, const void *qkv, const void *out, const float *lse, int B, int T, int C, int NH, const ngpt_dropout *drop);
    /* Decoding positions t..t+n-1 of S sequences (generation with a KV cache; n > 1 feeds a prompt at once).
     * qkv (S,n,3C), out (S,n,C): row s*n+i is position t+i of sequence s. Stores each row's k and v at its
     * position of kv (S, 2, maxT, C) (keys then values), then out = each row's attention of q over its
     * sequence's positions 0..t+i. 0 <= t, t + n <= maxT. t_at: NULL, or a device int32 the op reads t from when it
     * runs (so that a graph replays it at each step's position); when that t is outside 0..maxT-n, every row of out
     * gets NaN and nothing is stored. */
    void (*attention_decode)(ngpt_backend *be, void *out, void *kv, const void *qkv, int S, int t, int n, int maxT, int C, int NH,
                             const int32_t *t_at);
    /* exact (erf) GELU; out may alias inp, and in gelu_backward dinp may alias dout */
    void (*gelu_forward)(ngpt_backend *be, void *out, const void *inp, size_t n);
    void (*gelu_backward)(ngpt_backend *be, void *dinp, const void *inp, const void *dout, size_t n);
    /* out = a + b; out may alias a or b */
    void (*residual_forward)(ngpt_backend *be, void *out, const void *a, const void *b, size_t n);
    /* out = inp * mask / (1-p); out may alias inp; also the backward of dropout (same mask) */
    void (*dropout)(ngpt_backend *be, void *out, const void *inp, size_t n, const ngpt_dropout *drop);
    /* Softmax cross-entropy over the first V of Vp logits of each of N rows: losses (N) f32 = lse - logit[target].
     * When dscale != 0 the logits are overwritten by their gradient (softmax - onehot) * dscale, with 0 in
     * the V..Vp padding. */
    void (*crossentropy)(ngpt_backend *be, void *logits, float *losses, const int32_t *targets, int N, int V, int Vp, float dscale);
    /* sum of squares of n act values (waits for the result) */
    double (*norm_sq)(ngpt_backend *be, const void *x, size_t n);
    /* AdamW on n parameters: master (f32, the truth; NULL when dtype is f32 and param is the master),
     * param (act), grad (act), m and v in h->moments_dtype */
    void (*adamw)(ngpt_backend *be, void *param, float *master, const void *grad, void *m, void *v, size_t n, const ngpt_adamw *h);
    /* Runs fn(ctx, lane) for lane < lanes, possibly at once on different threads, and returns when all are done.
     * The graph uses it for the parts of a micro-batch that share nothing (their own buffers, their own
     * gradients); the ops called inside must give the same results as when the lanes run one after another.
     * NULL: one after another. */
    void (*run_lanes)(ngpt_backend *be, int lanes, void (*fn)(void *ctx, int lane), void *ctx);
    /* Optional (NULL: not offered; the CUDA backend's CUDA graphs). The ops called between graph_begin and graph_end
     * are recorded, not run, as one graph; each graph_launch runs them in order on the buffers' contents at that
     * time, as one operation. Between the two, only ops and copies between device buffers may be called (no
     * upload, download, fence, sync, norm_sq or arena call). graph_end returns NULL when the recording failed:
     * then the backend's status is as it was at graph_begin, and the caller runs the ops itself. */
    void (*graph_begin)(ngpt_backend *be);
    void *(*graph_end)(ngpt_backend *be);
    void (*graph_launch)(ngpt_backend *be, void *graph);
    void (*graph_free)(ngpt_backend *be, void *graph);
};

/* The counter-based generator shared by both backends: 32 random bits from (seed, stream, i). */
#if defined(__CUDACC__)
#define NGPT_HOST_DEVICE __host__ __device__
#else
#define NGPT_HOST_DEVICE
#endif
static inline NGPT_HOST_DEVICE uint32_t ngpt_hash(uint64_t seed, uint64_t stream, uint64_t i) {
    uint64_t z = seed ^ (stream * 0x9E3779B97F4A7C15ull) ^ (i * 0xD1B54A32D192ED03ull);
    z ^= z >> 30; z *= 0xBF58476D1CE4E5B9ull;
    z ^= z >> 27; z *= 0x94D049BB133111EBull;
    z ^= z >> 31;
#ifdef __cplusplus /* C++ projects build with -Wold-style-cast, others with -Wconversion: a cast each understands */
    return static_cast<uint32_t>(z >> 32);
#else
    return (uint32_t)(z >> 32);
#endif
}
/* uniform in [0, 1) with 24 bits */
static inline NGPT_HOST_DEVICE float ngpt_uniform(uint64_t seed, uint64_t stream, uint64_t i) {
#ifdef __cplusplus
    return static_cast<float>(ngpt_hash(seed, stream, i) >> 8) * (1.0f / 16777216.0f);
#else
    return (float)(ngpt_hash(seed, stream, i) >> 8) * (1.0f / 16777216.0f);
#endif
}

/* The CPU backend (nanogpt.c): fp32, nthreads worker threads (0 = one per core). */
int ngpt_cpu_backend_create(ngpt_backend **out, int nthreads, char *err, size_t errlen);

/* The CUDA backend (nanogpt.cu). Without NGPT_CUDA, nanogpt.c defines these to fail with NGPT_ERR_DEVICE. */
int ngpt_cuda_available(char *why, size_t whylen);  /* 1 when a usable device exists, else 0 and why */
int ngpt_cuda_compute_capability(void);             /* 10 * major + minor of that device; 0 when there is none */
int ngpt_cuda_sm_count(void);                       /* its streaming multiprocessors; 0 when there is none */
/* 1 when a 16-bit backend made now would run attention at head size 64 on the sm_90a wgmma kernels (the device,
 * the build, NGPT_MATMUL and NGPT_ATTENTION, the driver allow it), whose backward keeps dS^T in scratch */
int ngpt_cuda_wgmma_attention(void);
int ngpt_cuda_mem_info(size_t *free_bytes, size_t *total_bytes, char *err, size_t errlen);
/* NGPT_ERR_ARG where an environment switch (README, "Kernel switches") is set to a value it does not take; err names it */
int ngpt_cuda_backend_create(ngpt_backend **out, int dtype, char *err, size_t errlen);
/* a one-line description: name, compute capability, memory, bf16 support, the 16-bit matmul kernel (NGPT_ERR_ARG
 * and the switch, as ngpt_cuda_backend_create, where one is set to a value it does not take) */
int ngpt_cuda_describe(char *out, size_t outlen);

#ifdef __cplusplus
}
#endif
#endif /* NANOGPT_H */
