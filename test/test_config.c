/* test_config.c: configuration (keys, values, files, errors), the default job's presets, and the data
 * files (prepare, the loader's checks and error messages). */
#define NGPT_NO_MAIN
#include "../nanogpt.c"
#include "check.h"
#include "files.h"

static char tmpdir[256];

static const char *tmp_path(const char *name) {
    static char buf[4][512];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_file(const char *path, const void *data, size_t n) {
    FILE *f = fopen(path, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

/* text written as tmpdir/name, then loaded as a config file into c */
static int load_config_text(ngpt_config *c, const char *name, const char *text, char *err, size_t errlen) {
    write_file(tmp_path(name), text, strlen(text));
    return ngpt_config_load(c, tmp_path(name), err, errlen);
}

static void test_set_and_validate(void) {
    ngpt_config c;
    char err[NGPT_ERRLEN];
    ngpt_config_defaults(&c);
    CHECK(c.batch_size == 12 && c.block_size == 1024 && c.gradient_accumulation_steps == 40 && c.beta2 == 0.95,
          "nanoGPT's train.py defaults");
    CHECK(ngpt_config_set(&c, "batch_size", "64", err, sizeof err) == 0 && c.batch_size == 64, "set batch_size");
    CHECK(ngpt_config_set(&c, "learning_rate", "3e-4", err, sizeof err) == 0 && c.learning_rate == 3e-4, "set learning_rate");
    CHECK(ngpt_config_set(&c, "bias", "True", err, sizeof err) == 0 && c.bias == 1, "set bias True");
    /* a seed past 2^53 is kept exactly (through a double it became ...768); other forms of a number as a double */
    static const struct { const char *text; long long seed; } seeds[] = {
        {"1234567890123456789", 1234567890123456789LL}, {"9_199_999_999_999_999_999", 9199999999999999999LL},
        {" 9007199254740993", 9007199254740993LL},       {"1e18", 1000000000000000000LL},
        {"1337", 1337}};
    for (size_t i = 0; i < sizeof seeds / sizeof seeds[0]; i++)
        CHECK(ngpt_config_set(&c, "seed", seeds[i].text, err, sizeof err) == 0 && c.seed == seeds[i].seed, "seed = %s: %lld (%s)", seeds[i].text,
              c.seed, err);
    CHECK(ngpt_config_set(&c, "dataset", "'shakespeare_char'", err, sizeof err) == 0 && !strcmp(c.dataset, "shakespeare_char"),
          "quoted string");
    char dir[600];
    CHECK(!strcmp(dataset_dir(&c, dir, sizeof dir), "data/shakespeare_char"), "dataset is a folder under data/: %s", dir);
    snprintf(c.dataset, sizeof c.dataset, "/srv/corpus");
    CHECK(!strcmp(dataset_dir(&c, dir, sizeof dir), "/srv/corpus"), "an absolute dataset is that folder (os.path.join): %s", dir);
    snprintf(c.data_dir, sizeof c.data_dir, "elsewhere");
    CHECK(!strcmp(dataset_dir(&c, dir, sizeof dir), "elsewhere"), "data_dir over dataset: %s", dir);
    c.data_dir[0] = 0;
    CHECK(ngpt_config_set(&c, "gradient_accumulation_steps", "5 * 8", err, sizeof err) == 0 && c.gradient_accumulation_steps == 40,
          "product");
    CHECK(ngpt_config_set(&c, "max_memory", "2.68GiB", err, sizeof err) == 0 && fabs(c.max_memory - 2.68 * GiB) < 1, "max_memory");
    CHECK(ngpt_config_set(&c, "wandb_log", "False", err, sizeof err) == 0, "nanoGPT's wandb keys are accepted");

    int rc = ngpt_config_set(&c, "bath_size", "3", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "'batch_size'"), "unknown key names the closest: %s", err);
    rc = ngpt_config_set(&c, "lerning_rate", "3", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "'learning_rate'"), "unknown key names the closest: %s", err);
    /* values refused, each with what its message must (and must not) say */
    static const struct { const char *key, *value, *says, *not_says; } refused[] = {
        {"lr", "3e-4", "'learning_rate'", NULL},        /* another trainer's name for a key names the key */
        {"seq_len", "3", "'block_size'", NULL},
        {"val_loss_every", "250", "'eval_interval'", NULL}, /* llm.c's train_gpt2.py */
        {"input_bin", "dev/data/*_train_*.bin", "'data_dir'", NULL},
        {"total_batch_size", "524288", "batch_size x gradient_accumulation_steps x block_size", "did you mean"},
        {"max_iters", "5__000", "[0, 2000000000]", NULL}, /* not Python either */
        {"min_lr", "learning_rate / 10", "not Python expressions", NULL},
        {"lr_decay_iters", "max_iters", "not Python expressions", NULL}, /* a key's name: its value is not looked up */
        {"n_layer", "2; n_head=2", "one `key = value` per line", NULL},
        {"always_save_checkpoint", "True; eval_only=False", "one `key = value` per line", NULL},
        {"recompute", "none", "[-1, 3]", "Python"}, /* a word is no expression */
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        rc = ngpt_config_set(&c, refused[i].key, refused[i].value, err, sizeof err);
        CHECK(rc == NGPT_ERR_ARG && strstr(err, refused[i].says) && !(refused[i].not_says && strstr(err, refused[i].not_says)), "%s = %s: %s",
              refused[i].key, refused[i].value, err);
    }
    CHECK(ngpt_config_set(&c, "max_iters", "5_000", err, sizeof err) == 0 && c.max_iters == 5000, "Python's 5_000: %s", err);
    CHECK(ngpt_config_set(&c, "max_iters", "5000 ;", err, sizeof err) == 0 && c.max_iters == 5000, "Python's closing semicolon: %s", err);
    rc = ngpt_config_set(&c, "batch_size", "-1", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "[1, 1000000]") && !strstr(err, "Python"), "range in the message: %s", err);
    rc = ngpt_config_set(&c, "batch_size", "1.5", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "integer"), "non-integer: %s", err);
    rc = ngpt_config_set(&c, "dropout", "abc", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "[0, 0.99]"), "non-number: %s", err);
    rc = ngpt_config_set(&c, "device", "tpu", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "auto|cpu|cuda"), "choices: %s", err);
    rc = ngpt_config_set(&c, "bias", "maybe", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "True or False"), "bool: %s", err);
    rc = ngpt_config_set(&c, "dataset", " 'foo", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "dataset = 'foo: the quote is not closed"), "unclosed quote: %s", err);
    rc = ngpt_config_set(&c, "out_dir", "\"", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "not closed"), "a lone quote: %s", err);

    /* a size needs a unit: is 2.68 bytes or GiB? 0 (no cap) alone needs none */
    rc = ngpt_config_set(&c, "max_memory", "2.68", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "max_memory = '2.68'") && strstr(err, "unit") && strstr(err, "KiB/MiB/GiB/TiB") &&
              strstr(err, "KB/MB/GB/TB"), "a size without a unit: %s", err);
    CHECK(ngpt_config_set(&c, "max_memory", "1e9", err, sizeof err) == NGPT_ERR_ARG, "1e9 without a unit is refused");
    CHECK(ngpt_config_set(&c, "max_memory", "0", err, sizeof err) == 0 && c.max_memory == 0, "0 = no cap: %s", err);
    CHECK(ngpt_config_set(&c, "max_memory", "1e9B", err, sizeof err) == 0 && c.max_memory == 1e9, "bytes with B: %s", err);
    CHECK(ngpt_config_set(&c, "max_memory", "512 MB", err, sizeof err) == 0 && c.max_memory == 512e6, "512 MB: %s", err);
    /* checkpoints written before sizes carried a unit stored bare bytes: those still read */
    CHECK(config_set(&c, "max_memory", "2877628579.84", 1, err, sizeof err) == 0 && c.max_memory == 2877628579.84, "stored bytes: %s", err);

    ngpt_config_defaults(&c);
    c.n_embd = 100;
    c.n_head = 12;
    rc = config_validate(&c, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "n_embd = 100 is not a multiple of n_head = 12") && strstr(err, "n_embd = 96 or 108") &&
              strstr(err, "n_head = 1, 2, 4, 5, 10, 20, 25, 50, 100 (divisors"),
          "divisibility names the valid values: %s", err);
}

/* Each reader at its edges (a review's mutants got past every one): booleans as Python's and YAML's words in any
 * case, a choice whole (never a prefix of one, nor empty), text of at most 255 bytes with no control character and
 * with its semicolons, a size up to 1000TB, text after a closing quote on the command line (where # is no comment),
 * the surrogates' last code point, a file line's limit */
static void test_value_edges(void) {
    ngpt_config c;
    char err[NGPT_ERRLEN], out[16];
    size_t at;
    int quoted;
    ngpt_config_defaults(&c);
    static const char *const on[] = {"true", "TRUE", "True", "yes", "On", "1"}, *const off[] = {"false", "False", "no", "OFF", "off", "0"};
    for (int i = 0; i < 6; i++) {
        c.compile = 0;
        CHECK(ngpt_config_set(&c, "compile", on[i], err, sizeof err) == 0 && c.compile == 1, "compile = %s: %d (%s)", on[i], c.compile, err);
        c.compile = 1;
        CHECK(ngpt_config_set(&c, "compile", off[i], err, sizeof err) == 0 && c.compile == 0, "compile = %s: %d (%s)", off[i], c.compile, err);
    }
    static const struct { const char *key, *value, *says; } refused[] = {
        {"bias", "oops", "True or False"},           {"bias", "o", "True or False"},
        {"dtype", "float", "auto|float32|bfloat16|float16"}, {"device", "cu", "auto|cpu|cuda"},
        {"device", "''", "auto|cpu|cuda"},             {"on_nonfinite", "s", "skip|halt"},
        {"out_dir", "a\nb", "control character (byte 0x0A at 1)"},
        {"out_dir", "'a' # b", "after the closing quote, unexpected `# b`"},
        {"max_memory", "2000TB", "up to 1000TB"},      {"max_memory", "infGB", "max_memory"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int rc = ngpt_config_set(&c, refused[i].key, refused[i].value, err, sizeof err);
        CHECK(rc == NGPT_ERR_ARG && strstr(err, refused[i].says), "%s = %s: rc %d: %s", refused[i].key, refused[i].value, rc, err);
    }
    CHECK(ngpt_config_set(&c, "max_memory", "1000TB", err, sizeof err) == 0 && c.max_memory == 1e15, "1000TB: %s", err);
    char longest[300];
    memset(longest, 'a', 255);
    longest[255] = 0;
    CHECK(ngpt_config_set(&c, "out_dir", longest, err, sizeof err) == 0 && strlen(c.out_dir) == 255, "255 bytes of out_dir: %s", err);
    strcat(longest, "a");
    CHECK(ngpt_config_set(&c, "out_dir", longest, err, sizeof err) == NGPT_ERR_ARG && strstr(err, "longer than 255 characters"),
          "256 bytes of out_dir: %s", err);
    CHECK(ngpt_config_set(&c, "out_dir", "'run;1'", err, sizeof err) == 0 && !strcmp(c.out_dir, "run;1") &&
              ngpt_config_set(&c, "out_dir", "out;", err, sizeof err) == 0 && !strcmp(c.out_dir, "out;"),
          "a text's semicolon is its own: %s (%s)", c.out_dir, err);
    CHECK(config_value("'\\udfff'", 1, out, sizeof out, &at, &quoted) == VALUE_BAD_ESCAPE && at == 1, "the last surrogate is refused too");
    /* a file: a line of 1022 characters is read, a longer one refused with the limit; an escaped tab is a control character */
    static char text[1100];
    memset(text, 'x', 1022);
    text[0] = '#';
    strcpy(text + 1022, "\nbatch_size = 3\n");
    ngpt_config_defaults(&c);
    CHECK(load_config_text(&c, "edge.cfg", text, err, sizeof err) == 0 && c.batch_size == 3, "a line of 1022 characters: %s", err);
    memset(text, 'x', 1050);
    text[0] = '#';
    strcpy(text + 1050, "\n");
    int rc = load_config_text(&c, "edge.cfg", text, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "edge.cfg:1: line longer than 1022 characters"), "a line of 1050 characters: rc %d: %s", rc, err);
    CHECK(load_config_text(&c, "edge.cfg", "out_dir = 'x\\ty'\n", err, sizeof err) == NGPT_ERR_ARG && strstr(err, "edge.cfg:1:") &&
              strstr(err, "byte 0x09"), "an escaped tab: %s", err);
}

static void test_config_file(void) {
    const char *text = "# a nanoGPT config file\n"
                       "out_dir = 'out-x'  # trailing comment\n"
                       "\n"
                       "batch_size = 8\n"
                       "wandb_project = \"a # not a comment\"\n"
                       "gradient_accumulation_steps = 2 * 3\n"
                       "decay_lr = False\n";
    write_file(tmp_path("ok.cfg"), text, strlen(text));
    ngpt_config c;
    char err[NGPT_ERRLEN];
    ngpt_config_defaults(&c);
    int rc = ngpt_config_load(&c, tmp_path("ok.cfg"), err, sizeof err);
    CHECK(rc == 0, "load: %s", err);
    CHECK(!strcmp(c.out_dir, "out-x") && c.batch_size == 8 && c.gradient_accumulation_steps == 6 && c.decay_lr == 0, "values");

    const char *bad = "batch_size = 5\nn_layers = 3\n";
    rc = load_config_text(&c, "bad.cfg", bad, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "bad.cfg:2:") && strstr(err, "'n_layer'"), "file, line, closest key: %s", err);
    CHECK(c.batch_size == 8, "a refused file keeps none of its lines: batch_size %d", c.batch_size);
    const char *noeq = "batch_size 8\n";
    rc = load_config_text(&c, "noeq.cfg", noeq, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "noeq.cfg:1:") && strstr(err, "found 'batch_size 8'"), "missing '=': %s", err);
    const char *bom = "\xEF\xBB\xBF" "batch_size = 7\n";
    rc = load_config_text(&c, "bom.cfg", bom, err, sizeof err);
    CHECK(rc == 0 && c.batch_size == 7, "a UTF-8 byte order mark is skipped: %s", err);
    const char *open_quote = "batch_size = 8\ndataset = 'foo  # a comment\n";
    rc = load_config_text(&c, "quote.cfg", open_quote, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "quote.cfg:2:11: the quote ' opened here is not closed"), "unclosed quote: %s", err);
    const char *apostrophe = "out_dir = \"it's\"  # a comment\n";
    rc = load_config_text(&c, "apostrophe.cfg", apostrophe, err, sizeof err);
    CHECK(rc == 0 && !strcmp(c.out_dir, "it's"), "a quote inside the other quotes: %s", err);
    rc = ngpt_config_load(&c, tmp_path("missing.cfg"), err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "missing.cfg"), "missing file: %s", err);
    /* a NUL byte past the head read for a binary file's: refused where it is, not read as n_layer = 2 */
    char late_nul[700];
    memset(late_nul, '#', 600);
    static const char tail[] = "\nn_layer = 2\0" "0\nbatch_size = 4\n";
    memcpy(late_nul + 600, tail, sizeof tail - 1);
    write_file(tmp_path("nul.cfg"), late_nul, 600 + sizeof tail - 1);
    rc = ngpt_config_load(&c, tmp_path("nul.cfg"), err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "nul.cfg:2:12: a NUL byte; a config file is text"), "a late NUL byte: %s", err);
}

/* nanoGPT's config/finetune_shakespeare.py as it is: an import, and an ignored key whose value is an expression */
static const char finetune_shakespeare_py[] =
    "import time\n"
    "\n"
    "out_dir = 'out-shakespeare'\n"
    "eval_interval = 5\n"
    "eval_iters = 40\n"
    "wandb_log = False # feel free to turn on\n"
    "wandb_project = 'shakespeare'\n"
    "wandb_run_name = 'ft-' + str(time.time())\n"
    "\n"
    "dataset = 'shakespeare'\n"
    "init_from = 'gpt2-xl' # this is the largest GPT-2 model\n"
    "\n"
    "# only save checkpoints if the validation loss improves\n"
    "always_save_checkpoint = False\n"
    "\n"
    "# the number of examples per iter:\n"
    "# 1 batch_size * 32 grad_accum * 1024 tokens = 32,768 tokens/iter\n"
    "# shakespeare has 301,966 tokens, so 1 epoch ~= 9.2 iters\n"
    "batch_size = 1\n"
    "gradient_accumulation_steps = 32\n"
    "max_iters = 20\n"
    "\n"
    "# finetune at constant LR\n"
    "learning_rate = 3e-5\n"
    "decay_lr = False\n";

static void test_nanogpt_python_configs(void) {
    ngpt_config c;
    char err[NGPT_ERRLEN];
    write_file(tmp_path("finetune_shakespeare.py"), finetune_shakespeare_py, strlen(finetune_shakespeare_py));
    ngpt_config_defaults(&c);
    int rc = ngpt_config_load(&c, tmp_path("finetune_shakespeare.py"), err, sizeof err);
    CHECK(rc == 0, "nanoGPT's finetune_shakespeare.py: %s", err);
    CHECK(!strcmp(c.out_dir, "out-shakespeare") && c.eval_interval == 5 && c.eval_iters == 40 && !strcmp(c.dataset, "shakespeare") &&
              !strcmp(c.init_from, "gpt2-xl") && c.always_save_checkpoint == 0 && c.batch_size == 1 && c.gradient_accumulation_steps == 32 &&
              c.max_iters == 20 && c.learning_rate == 3e-5 && c.decay_lr == 0,
          "finetune_shakespeare.py's values: out_dir %s dataset %s init_from %s batch_size %d", c.out_dir, c.dataset, c.init_from, c.batch_size);

    /* import lines in their forms; an ignored key takes any expression, on the command line too */
    const char *imports = "import time\n  import os, sys  # for paths\nfrom datetime import datetime\nimport numpy as np\n"
                          "wandb_run_name = 'run-' + datetime.now().strftime('%Y%m%d') + f\"{time.time():.0f}\n"
                          "wandb_project = os.environ['PROJECT'\n"
                          "batch_size = 3\n";
    write_file(tmp_path("imports.cfg"), imports, strlen(imports));
    ngpt_config_defaults(&c);
    rc = ngpt_config_load(&c, tmp_path("imports.cfg"), err, sizeof err);
    CHECK(rc == 0 && c.batch_size == 3, "import lines and ignored expressions: %s", err);
    CHECK(ngpt_config_set(&c, "wandb_run_name", "'ft-' + str(time.time())", err, sizeof err) == 0, "--wandb_run_name=<expression>: %s", err);
    /* what only looks like an import is not skipped */
    const char *notimport = "importance = 3\n";
    rc = load_config_text(&c, "notimport.cfg", notimport, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "notimport.cfg:1: unknown key 'importance'"), "importance = 3: %s", err);
    /* Python's augmented assignment, and a line with no key */
    rc = load_config_text(&c, "aug.cfg", "batch_size = 4\nbatch_size *= 2\n", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "aug.cfg:2: 'batch_size *=' is Python's augmented assignment, which nanogpt does not run: set "
                                            "batch_size to its value"),
          "batch_size *= 2: %s", err);
    rc = load_config_text(&c, "aug2.cfg", "max_iters //= 2\n", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "aug2.cfg:1: 'max_iters //=' is Python's augmented assignment"), "max_iters //= 2: %s", err);
    rc = load_config_text(&c, "nokey.cfg", " = 3\n", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "nokey.cfg:1: no key before '='") && !strstr(err, "did you mean"), "= 3: %s", err);
    const char *stmt = "import\n";
    rc = load_config_text(&c, "stmt.cfg", stmt, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "stmt.cfg:1: expected `key = value`, found 'import'"), "a bare import: %s", err);
    /* a real key still needs a value nanogpt can read */
    const char *expr = "batch_size = 2\nout_dir = 'out-' + str(time.time())\n";
    rc = load_config_text(&c, "expr.cfg", expr, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "expr.cfg:2:20: out_dir = 'out-' + str(time.time()): + joins quoted strings, not `str(") &&
              strstr(err, "not Python expressions"),
          "an expression for a real key: %s", err);
}

/* a quoted value ends at its closing quote: 'a' + 'b' is ab (Python's concatenation), anything else after it is an error */
static void test_text_after_quote(void) {
    ngpt_config c;
    char err[NGPT_ERRLEN];
    ngpt_config_defaults(&c);
    const char *concat = "dataset = 'shake' + \"speare\"  +'_char' # joined\nout_dir = \"it's\" + ' out'\n";
    write_file(tmp_path("concat.cfg"), concat, strlen(concat));
    int rc = ngpt_config_load(&c, tmp_path("concat.cfg"), err, sizeof err);
    CHECK(rc == 0 && !strcmp(c.dataset, "shakespeare_char") && !strcmp(c.out_dir, "it's out"), "'a' + 'b': %s -> dataset %s, out_dir %s", err,
          c.dataset, c.out_dir);
    /* Python's escapes in a quoted string: its characters, as UTF-8; a backslash before anything else is itself */
    static const struct { const char *value, *text; } escapes[] = {
        {"'it\\'s'", "it's"},       {"\"say \\\"hi\\\"\"", "say \"hi\""}, {"'a\\\\b'", "a\\b"},      {"'1\\n2\\t3'", "1\n2\t3"},
        {"'\\x41\\101'", "AA"},     {"'caf\\u00e9'", "caf\xc3\xa9"},   {"'\\U0001F600'", "\xf0\x9f\x98\x80"}, {"'\\012'", "\n"},
        {"'\\d+'", "\\d+"},         {"'a\\bc'", "a\bc"}};
    for (size_t i = 0; i < sizeof escapes / sizeof escapes[0]; i++) {
        char out[64];
        size_t at;
        int quoted, e = config_value(escapes[i].value, 1, out, sizeof out, &at, &quoted);
        CHECK(e == VALUE_OK && quoted && !strcmp(out, escapes[i].text), "%s: %d, '%s', want '%s'", escapes[i].value, e, out, escapes[i].text);
    }
    char nul_out[16];
    size_t nul_at;
    int nul_quoted;
    CHECK(config_value("'a\\0b'", 1, nul_out, sizeof nul_out, &nul_at, &nul_quoted) == VALUE_BAD_ESCAPE && nul_at == 2 &&
              config_value("'\\x00'", 1, nul_out, sizeof nul_out, &nul_at, &nul_quoted) == VALUE_BAD_ESCAPE &&
              config_value("'\\U00110000'", 1, nul_out, sizeof nul_out, &nul_at, &nul_quoted) == VALUE_BAD_ESCAPE &&
              config_value("'\\ud800'", 1, nul_out, sizeof nul_out, &nul_at, &nul_quoted) == VALUE_BAD_ESCAPE &&
              config_value("'\\x4'", 1, nul_out, sizeof nul_out, &nul_at, &nul_quoted) == VALUE_BAD_ESCAPE &&
              config_value("'\\N{BULLET}'", 1, nul_out, sizeof nul_out, &nul_at, &nul_quoted) == VALUE_BAD_ESCAPE,
          "a NUL, a surrogate, past U+10FFFF, a short \\x and \\N{...}: refused at the backslash");
    struct { const char *text, *want; } bad[] = {
        {"dataset = 'a' 'b'\n", "bad.cfg:1:15: dataset = 'a' 'b': after the closing quote, unexpected `'b'`"},
        {"batch_size = 2\ndataset = 'a'b  # c\n", "bad.cfg:2:14: dataset = 'a'b  # c: after the closing quote, unexpected `b  # c`"},
        {"dataset = 'a' +\n", "bad.cfg:1:16: dataset = 'a' +: + joins quoted strings, not ``"},
        {"dataset = 'a' + b\n", "bad.cfg:1:17: dataset = 'a' + b: + joins quoted strings, not `b`"},
        {"dataset = 'a' + 'b\n", "bad.cfg:1:17: the quote ' opened here is not closed: 'b"},
        {"batch_size = int('8')\n", "bad.cfg:1:18: batch_size = int('8'): a quote inside an unquoted value"},
        {"out_dir = 'a' * 2\n", "bad.cfg:1:15: out_dir = 'a' * 2: after the closing quote, unexpected `* 2`"},
        {"out_dir = \"a'\" + 'b\"'\n", "bad.cfg:1: out_dir = a'b\": holds both ' and \""},
        /* text unquoted is a Python name or call, whose value nanoGPT would use: never the text itself */
        {"wandb_run_name = 'mini-gpt'\nout_dir = wandb_run_name\n", "bad.cfg:2:11: out_dir = wandb_run_name: a text setting in a config file is a quoted string"},
        {"dataset = shakespeare_char  # bare\n", "bad.cfg:1:11: dataset = shakespeare_char: a text setting in a config file is a quoted string"},
        {"out_dir = os.getcwd()\n", "bad.cfg:1:11: out_dir = os.getcwd(): a text setting in a config file is a quoted string"},
        {"batch_size == 12\n", "bad.cfg:1:12: `==` compares; a setting is `key = value`"},
        {"out_dir = # none\n", "bad.cfg:1:11: out_dir has no value: a text setting is a quoted string"},
        {"out_dir = 'C:\\Users'\n", "bad.cfg:1:14: out_dir = 'C:\\Users': the escape at character 4 gives no character"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ngpt_config_defaults(&c);
        rc = load_config_text(&c, "bad.cfg", bad[i].text, err, sizeof err);
        CHECK(rc != 0 && strstr(err, bad[i].want) && !strcmp(c.dataset, "openwebtext") && !strcmp(c.out_dir, "out"),
              "%s: got '%s', want '%s'", bad[i].text, err, bad[i].want);
    }
    /* the command line's value is raw text; only a leading quote is special, and it must close where the value ends */
    CHECK(ngpt_config_set(&c, "out_dir", "it's", err, sizeof err) == 0 && !strcmp(c.out_dir, "it's"), "--out_dir=it's: %s", err);
    CHECK(ngpt_config_set(&c, "out_dir", "a#b", err, sizeof err) == 0 && !strcmp(c.out_dir, "a#b"), "--out_dir=a#b: %s", err);
    CHECK(ngpt_config_set(&c, "dataset", " 'a' + 'b' ", err, sizeof err) == 0 && !strcmp(c.dataset, "ab"), "--dataset=\"'a' + 'b'\": %s", err);
    ngpt_config_defaults(&c);
    rc = ngpt_config_set(&c, "dataset", "'a'b", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "dataset = 'a'b: after the closing quote, unexpected `b`") && !strcmp(c.dataset, "openwebtext"),
          "--dataset=\"'a'b\": %s", err);
    rc = ngpt_config_set(&c, "dataset", "'a' + b", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "+ joins quoted strings, not `b`"), "--dataset=\"'a' + b\": %s", err);
    rc = ngpt_config_set(&c, "out_dir", "a'b\"c", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "holds both"), "a value with both quotes: %s", err);
    /* a checkpoint's stored lines are read as config_line wrote them */
    CHECK(config_set(&c, "out_dir", "'a'b\"c'", 1, err, sizeof err) == 0 && !strcmp(c.out_dir, "a'b\"c"), "stored: %s", err);
}

/* nanoGPT's device strings: cuda:0 is cuda; another GPU and mps say what to do */
static void test_device_strings(void) {
    ngpt_config c;
    char err[NGPT_ERRLEN];
    ngpt_config_defaults(&c);
    CHECK(ngpt_config_set(&c, "device", "cuda:0", err, sizeof err) == 0 && !strcmp(c.device, "cuda"), "cuda:0 is stored as cuda: %s", err);
    CHECK(ngpt_config_set(&c, "device", "'cuda:0'", err, sizeof err) == 0 && !strcmp(c.device, "cuda"), "'cuda:0': %s", err);
    ngpt_config_defaults(&c);
    int rc = ngpt_config_set(&c, "device", "cuda:1", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "device = 'cuda:1'") && strstr(err, "first visible") && strstr(err, "CUDA_VISIBLE_DEVICES=1") &&
              !strcmp(c.device, "auto"),
          "cuda:1: %s", err);
    rc = ngpt_config_set(&c, "device", "cuda:12", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "CUDA_VISIBLE_DEVICES=12"), "cuda:12: %s", err);
    rc = ngpt_config_set(&c, "device", "mps", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "no Apple GPU") && strstr(err, "device = 'cpu'"), "mps: %s", err);
    rc = ngpt_config_set(&c, "device", "cuda:x", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "must be one of auto|cpu|cuda"), "cuda:x: %s", err);
    const char *file = "device = 'cuda:0'\n";
    rc = load_config_text(&c, "dev.cfg", file, err, sizeof err);
    CHECK(rc == 0 && !strcmp(c.device, "cuda"), "device = 'cuda:0' in a file: %s", err);
    file = "batch_size = 2\ndevice = 'mps'\n";
    rc = load_config_text(&c, "dev.cfg", file, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "dev.cfg:2: device = 'mps'"), "device = 'mps' in a file: %s", err);

    /* the struct set by hand: resolve_device reads cuda:0 as cuda, and refuses what it cannot run on (not a silent CPU run) */
    int device = -1, dtype = -1;
    char note[NGPT_ERRLEN];
    ngpt_config_defaults(&c);
    copy_str(c.device, sizeof c.device, "cuda:1");
    rc = resolve_device(&c, &device, &dtype, note, sizeof note, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "CUDA_VISIBLE_DEVICES=1"), "resolve_device of cuda:1: %s", err);
    copy_str(c.device, sizeof c.device, "gpu");
    rc = resolve_device(&c, &device, &dtype, note, sizeof note, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "device = 'gpu': must be one of auto|cpu|cuda"), "resolve_device of gpu: %s", err);
    copy_str(c.device, sizeof c.device, "cuda:0");
    char why[NGPT_ERRLEN];
    int have_gpu = ngpt_cuda_available(why, sizeof why);
    rc = resolve_device(&c, &device, &dtype, note, sizeof note, err, sizeof err);
    CHECK(have_gpu ? rc == 0 && device == DEV_BACKEND_CUDA : rc == NGPT_ERR_DEVICE && strstr(err, "device = cuda, but"),
          "resolve_device of cuda:0 is cuda's: rc %d, %s", rc, err);
}

/* ngpt_config_print writes what ngpt_config_load reads back bit for bit (checkpoints store the same lines) */
static void test_print_load_round_trip(void) {
    ngpt_config a, b;
    char err[NGPT_ERRLEN];
    ngpt_config_defaults(&a);
    a.learning_rate = 0.1 + 0.2; /* not the double nearest 0.3: needs 17 digits */
    a.min_lr = 1e-3;
    a.max_memory = 2.68 * GiB;
    a.seed = 123456789012345LL;
    copy_str(a.out_dir, sizeof a.out_dir, "out dir # with a hash");
    copy_str(a.dataset, sizeof a.dataset, "it's");
    copy_str(a.init_from, sizeof a.init_from, "C:\\Users\\bob\\new\\w.bin"); /* backslashes: doubled, as the escapes read them back */
    FILE *f = fopen(tmp_path("printed.cfg"), "w");
    ngpt_config_print(&a, f);
    fclose(f);
    ngpt_config_defaults(&b);
    CHECK(ngpt_config_load(&b, tmp_path("printed.cfg"), err, sizeof err) == 0, "%s", err);
    CHECK(!memcmp(&a, &b, sizeof a), "a printed config does not load back the same (learning_rate %.17g vs %.17g)", a.learning_rate,
          b.learning_rate);
}

/* the built-in default job and the shipped config files say the same thing */
static void test_presets_match_files(void) {
    const char *files[2] = {"data/shakespeare_char/train.cfg", "data/shakespeare_char/train_cpu.cfg"};
    const char *const *presets[2] = {preset_shakespeare_char, preset_shakespeare_char_cpu};
    for (int i = 0; i < 2; i++) {
        ngpt_config a, b;
        char err[NGPT_ERRLEN];
        ngpt_config_defaults(&a);
        ngpt_config_defaults(&b);
        apply_preset(&a, presets[i]);
        int rc = ngpt_config_load(&b, files[i], err, sizeof err);
        CHECK(rc == 0, "%s: %s", files[i], err);
        CHECK(!memcmp(&a, &b, sizeof a), "%s differs from the built-in preset", files[i]);
    }
}

/* the ETA's words */
static void test_fmt_duration(void) {
    char b[32];
    CHECK(!strcmp(fmt_duration(b, sizeof b, 42.4), "42s") && !strcmp(fmt_duration(b, sizeof b, 200), "3m20s") &&
              !strcmp(fmt_duration(b, sizeof b, 9000), "2h30m") && !strcmp(fmt_duration(b, sizeof b, 3600 * 30 + 61), "30h01m"),
          "durations: %s", b);
    CHECK(!strcmp(fmt_duration(b, sizeof b, 1e12), "277777777h46m"), "past an int's seconds (an estimate of eval_iters 1e9): %s", b);
    /* parameter counts: nanoGPT's millions, whole below 10,000 (a tiny model read 0.00M) */
    CHECK(!strcmp(fmt_params(b, sizeof b, 124439808), "124.44M") && !strcmp(fmt_params(b, sizeof b, 10000), "0.01M") &&
              !strcmp(fmt_params(b, sizeof b, 9999), "9999") && !strcmp(fmt_params(b, sizeof b, 144), "144"),
          "parameter counts: %s", b);
}

static void test_lr_schedule(void) {
    ngpt_config c;
    ngpt_config_defaults(&c);
    c.learning_rate = 1e-3; c.min_lr = 1e-4; c.warmup_iters = 100; c.lr_decay_iters = 5000;
    CHECK_CLOSE(lr_at(&c, 0), 1e-3 * 1 / 101, 1e-6, "warmup start");
    CHECK_CLOSE(lr_at(&c, 99), 1e-3 * 100 / 101, 1e-6, "warmup end");
    CHECK_CLOSE(lr_at(&c, 100), 1e-3, 1e-6, "peak");
    CHECK_CLOSE(lr_at(&c, 2550), 1e-4 + 0.5 * (1e-3 - 1e-4), 1e-6, "cosine midpoint");
    CHECK_CLOSE(lr_at(&c, 5000), 1e-4, 1e-6, "decay end");
    CHECK_CLOSE(lr_at(&c, 6000), 1e-4, 1e-6, "after decay");
    c.warmup_iters = c.lr_decay_iters = 100; /* no cosine between: min_lr from the end of the warmup (nanoGPT's get_lr divides 0 by 0) */
    CHECK(lr_at(&c, 100) == (float)1e-4 && lr_at(&c, 99) == (float)(1e-3 * 100 / 101), "warmup_iters = lr_decay_iters: %g then %g",
          (double)lr_at(&c, 99), (double)lr_at(&c, 100));
    c.lr_decay_iters = 5000;
    c.decay_lr = 0;
    CHECK_CLOSE(lr_at(&c, 50), 1e-3, 1e-7, "constant");
    /* schedules nanoGPT's get_lr runs though they look mistaken: accepted, run as get_lr runs them, and noted */
    char err[NGPT_ERRLEN], note[400];
    c.decay_lr = 1;
    lr_schedule_note(&c, note, sizeof note);
    CHECK(!note[0], "nothing to note for an ordinary schedule: %s", note);
    c.warmup_iters = 100; c.lr_decay_iters = 50; /* train_shakespeare_char.py shortened: --max_iters=50 --lr_decay_iters=50 */
    CHECK(config_validate(&c, err, sizeof err) == 0, "lr_decay_iters below warmup_iters runs: %s", err);
    CHECK_CLOSE(lr_at(&c, 49), 1e-3 * 50 / 101, 1e-7, "still warming up past lr_decay_iters");
    CHECK_CLOSE(lr_at(&c, 100), 1e-4, 1e-7, "then min_lr");
    lr_schedule_note(&c, note, sizeof note);
    CHECK(strstr(note, "lr_decay_iters = 50 is below warmup_iters = 100: the learning rate warms up for 100 steps, then holds min_lr"),
          "the note: %s", note);
    c.warmup_iters = 10; c.lr_decay_iters = 110; c.learning_rate = 3e-5; c.min_lr = 6e-5; /* train_gpt2.py with a fine-tuning rate */
    CHECK(config_validate(&c, err, sizeof err) == 0, "min_lr above learning_rate runs: %s", err);
    CHECK_CLOSE(lr_at(&c, 60), 6e-5 + 0.5 * (3e-5 - 6e-5), 1e-10, "the cosine midpoint, rising");
    lr_schedule_note(&c, note, sizeof note);
    CHECK(strstr(note, "min_lr = 6e-05 is above learning_rate = 3e-05: after warmup the cosine schedule raises the rate"), "the note: %s", note);
}

/* ngpt_config_defaults is nanoGPT's train.py, key for key (README: "its train.py's defaults ... in the library's
 * ngpt_config_defaults"); device and dtype are nanogpt's auto, which picks what train.py's would */
static void test_defaults_are_train_py(void) {
    ngpt_config c;
    ngpt_config_defaults(&c);
    CHECK(!strcmp(c.out_dir, "out") && c.eval_interval == 2000 && c.log_interval == 1 && c.eval_iters == 200 && c.eval_only == 0 &&
              c.always_save_checkpoint == 1 && !strcmp(c.init_from, "scratch") && !strcmp(c.dataset, "openwebtext"),
          "train.py's I/O defaults: out_dir %s eval_interval %d eval_iters %d init_from %s", c.out_dir, c.eval_interval, c.eval_iters, c.init_from);
    CHECK(c.gradient_accumulation_steps == 5 * 8 && c.batch_size == 12 && c.block_size == 1024 && c.n_layer == 12 && c.n_head == 12 &&
              c.n_embd == 768 && c.dropout == 0.0 && c.bias == 0,
          "train.py's model defaults: n_layer %d n_head %d n_embd %d dropout %g bias %d", c.n_layer, c.n_head, c.n_embd, c.dropout, c.bias);
    CHECK(c.learning_rate == 6e-4 && c.max_iters == 600000 && c.weight_decay == 1e-1 && c.beta1 == 0.9 && c.beta2 == 0.95 &&
              c.grad_clip == 1.0 && c.decay_lr == 1 && c.warmup_iters == 2000 && c.lr_decay_iters == 600000 && c.min_lr == 6e-5,
          "train.py's optimizer defaults: learning_rate %g weight_decay %g warmup_iters %d min_lr %g", c.learning_rate, c.weight_decay,
          c.warmup_iters, c.min_lr);
    CHECK(c.compile == 1 && c.seed == 1337 && !strcmp(c.device, "auto") && !strcmp(c.dtype, "auto"), "compile %d seed %lld device %s dtype %s",
          c.compile, c.seed, c.device, c.dtype);
}

/* Value forms a mutation sweep found untested: each size unit's factor (BYTE_UNITS: KB... powers of 1000, KiB... and
 * K... powers of 1024, in any case), a NaN size refused as inf is, a boolean word in any case but never a number
 * other than 1 or 0, Python's rules for _ in a number, the keys whose 0 means "choose" or "off" (their help says
 * so), vocab_size up to 65536 (token files hold uint16 ids), another trainer's key named in any case */
static void test_value_forms(void) {
    ngpt_config c;
    char err[NGPT_ERRLEN];
    ngpt_config_defaults(&c);
    static const double TiB = GiB * 1024.0;
    static const struct { const char *value; double bytes; } sizes[] = {
        {"3KB", 3e3},  {"3KiB", 3 * 1024.0}, {"3k", 3 * 1024.0}, {"3MB", 3e6},  {"3MiB", 3 * MiB}, {"3M", 3 * MiB}, {"3gb", 3e9},
        {"3GiB", 3 * GiB}, {"3G", 3 * GiB},  {"3TB", 3e12},     {"3TiB", 3 * TiB}, {"3t", 3 * TiB}, {"3b", 3}};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
        CHECK(ngpt_config_set(&c, "max_memory", sizes[i].value, err, sizeof err) == 0 && c.max_memory == sizes[i].bytes,
              "max_memory = %s: %.0f bytes, want %.0f (%s)", sizes[i].value, c.max_memory, sizes[i].bytes, err);
    static const char *const on[] = {"YES", "Yes", "oN"}, *const off[] = {"NO", "No", "oFF"};
    for (size_t i = 0; i < sizeof on / sizeof on[0]; i++) {
        c.bias = 0;
        CHECK(ngpt_config_set(&c, "bias", on[i], err, sizeof err) == 0 && c.bias == 1, "bias = %s: %d (%s)", on[i], c.bias, err);
        CHECK(ngpt_config_set(&c, "bias", off[i], err, sizeof err) == 0 && c.bias == 0, "bias = %s: %d (%s)", off[i], c.bias, err);
    }
    static const struct { const char *key, *value, *says; } refused[] = {
        {"max_memory", "nanGB", "must be a size with a unit"}, {"max_memory", "NaN", "must be a size with a unit"},
        {"bias", "1.0", "True or False"},                      {"bias", "01", "True or False"},
        {"bias", "1x", "True or False"},                       {"bias", "2", "True or False"},
        {"max_iters", "5000_", "[0, 2000000000]"},             {"max_iters", "_5000", "[0, 2000000000]"},
        {"max_iters", "5_000_", "[0, 2000000000]"},            {"vocab_size", "65537", "[0, 65536]"},
        {"LR", "3e-4", "'learning_rate'"},
    };
    for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        int rc = ngpt_config_set(&c, refused[i].key, refused[i].value, err, sizeof err);
        CHECK(rc == NGPT_ERR_ARG && strstr(err, refused[i].says), "%s = %s: rc %d: %s", refused[i].key, refused[i].value, rc, err);
    }
    static const char *const zero_ok[] = {"vocab_size", "micro_batch", "logits_chunk", "threads", "grad_clip",
                                          "warmup_iters", "max_iters", "weight_decay", "dropout"};
    for (size_t i = 0; i < sizeof zero_ok / sizeof zero_ok[0]; i++)
        CHECK(ngpt_config_set(&c, zero_ok[i], "0", err, sizeof err) == 0, "%s = 0: %s", zero_ok[i], err);
    CHECK(ngpt_config_set(&c, "vocab_size", "65536", err, sizeof err) == 0 && c.vocab_size == 65536, "vocab_size = 65536: %s", err);
    /* a number too small for a double reads as the tiny value or 0 (Python's float()), one too large is refused */
    CHECK(ngpt_config_set(&c, "learning_rate", "1e-310", err, sizeof err) == 0 && c.learning_rate > 0 && c.learning_rate < 1e-309,
          "learning_rate = 1e-310: %g (%s)", c.learning_rate, err);
    CHECK(ngpt_config_set(&c, "learning_rate", "1e-400", err, sizeof err) == 0 && c.learning_rate == 0, "learning_rate = 1e-400: %g (%s)",
          c.learning_rate, err);
    CHECK(ngpt_config_set(&c, "learning_rate", "1e400", err, sizeof err) == NGPT_ERR_ARG && strstr(err, "[0, 10]"), "learning_rate = 1e400: %s",
          err);
}

/* a byte order mark opens a file only: on a later line it is a stray character in the key, as Python refuses it;
 * a checkpoint's stored value that opens one quote and closes with the other is refused, not read as text */
static void test_bom_and_stored_quotes(void) {
    ngpt_config c;
    char err[NGPT_ERRLEN];
    ngpt_config_defaults(&c);
    int rc = load_config_text(&c, "bom2.cfg", "batch_size = 7\n\xEF\xBB\xBF" "n_layer = 2\n", err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "bom2.cfg:2: unknown key") && c.n_layer == 12, "a byte order mark on line 2: rc %d: %s", rc, err);
    rc = config_set(&c, "out_dir", "'abc\"", 1, err, sizeof err);
    CHECK(rc == NGPT_ERR_ARG && strstr(err, "not closed") && !strcmp(c.out_dir, "out"), "stored 'abc\": rc %d: %s (out_dir %s)", rc, err, c.out_dir);
}

/* ---- data ---- */

static void test_prepare_char(void) {
    const char *text = "hello, world\nh\xC3\xA9llo\n"; /* includes U+00E9 */
    write_file(tmp_path("in.txt"), text, strlen(text));
    char err[NGPT_ERRLEN];
    int rc = prepare_char(tmp_path("in.txt"), tmp_path("ds"), 0.25, NULL, err, sizeof err);
    CHECK(rc == 0, "prepare: %s", err);
    CharVocab *v = malloc(sizeof *v);
    rc = charvocab_load(v, tmp_path("ds/meta.bin"), err, sizeof err);
    CHECK(rc == 0 && v->n == 11, "vocab: %d entries (%s)", v->n, err);
    CHECK(v->cp[0] == '\n' && v->cp[v->n - 1] == 0xE9, "code point order");
    /* bytes after the last character (a count too small, two files joined): refused, naming where they start */
    FILE *joined = fopen(tmp_path("ds/meta.bin"), "ab");
    if (joined) {
        fputs("GARBAGE", joined);
        fclose(joined);
    }
    CharVocab *w = malloc(sizeof *w);
    rc = charvocab_load(w, tmp_path("ds/meta.bin"), err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "meta.bin: trailing bytes after its 11 characters (from byte offset 39)"), "trailing bytes: %s", err);
    /* a character twice, or out of order: refused, naming the entry, its byte and the one before */
    for (int k = 0; k < 2; k++) {
        unsigned char bad[22] = "ngptchar\1\0\0\0\3\0\0\0\1a\1a\1b";
        if (k) bad[17] = 'b';
        write_file(tmp_path("twice.bin"), bad, sizeof bad);
        rc = charvocab_load(w, tmp_path("twice.bin"), err, sizeof err);
        CHECK(rc == NGPT_ERR_FORMAT && strstr(err, k ? "twice.bin: entry 1 at byte offset 18 (U+0061) comes after entry 0's U+0062"
                                                     : "twice.bin: entry 1 at byte offset 18 (U+0061) repeats entry 0's U+0061"),
              "meta.bin with %s: %s", k ? "b before a" : "a twice", err);
    }
    free(w);
    TokenFile tf, vf;
    rc = tokenfile_open(&tf, tmp_path("ds/train.bin"), v->n, 2, 0, err, sizeof err);
    CHECK(rc == 0, "train.bin: %s", err);
    rc = tokenfile_open(&vf, tmp_path("ds/val.bin"), v->n, 2, 0, err, sizeof err);
    CHECK(rc == 0, "val.bin: %s", err);
    size_t nchars = 19; /* "hello, world\nhéllo\n" */
    CHECK(tf.ntok == (size_t)(nchars * 0.75) && tf.ntok + vf.ntok == nchars, "split %zu + %zu", tf.ntok, vf.ntok);
    /* decode(train ++ val) == text */
    int32_t ids[32];
    for (size_t i = 0; i < tf.ntok; i++) ids[i] = tf.tokens[i];
    for (size_t i = 0; i < vf.ntok; i++) ids[tf.ntok + i] = vf.tokens[i];
    char back[64];
    size_t len = 0;
    rc = charvocab_decode(v, ids, nchars, back, sizeof back, &len, err, sizeof err);
    CHECK(rc == 0 && len == strlen(text) && !memcmp(back, text, len), "round trip: '%.*s'", (int)len, back);
    tokenfile_close(&tf);
    tokenfile_close(&vf);

    /* prepared again from another text, and cut off between its renames (val.bin a folder it cannot replace):
     * the old train.bin is gone, so the folder reads as not prepared, never as the new meta.bin over the old
     * tokens */
    const char *other = "zyxw vut\n";
    write_file(tmp_path("in2.txt"), other, strlen(other));
    CHECK(unlink(tmp_path("ds/val.bin")) == 0 && mkdir(tmp_path("ds/val.bin"), 0755) == 0, "val.bin replaced by a folder");
    write_file(tmp_path("ds/val.bin/keep"), "x", 1);
    rc = prepare_char(tmp_path("in2.txt"), tmp_path("ds"), 0.25, NULL, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "cannot rename into") &&
              strstr(err, "its train.bin, of the earlier vocabulary, was removed: the folder is not prepared, prepare it again"),
          "a rename that fails: %d %s", rc, err);
    CHECK(!file_exists(tmp_path("ds/train.bin")), "the old train.bin must not stay beside the new meta.bin");
    unlink(tmp_path("ds/val.bin/keep"));
    rmdir(tmp_path("ds/val.bin"));
    rc = prepare_char(tmp_path("in2.txt"), tmp_path("ds"), 0.25, NULL, err, sizeof err);
    CHECK(rc == 0 && file_exists(tmp_path("ds/train.bin")), "prepared again: %s", err);
    /* the same text again, cut off the same way: its vocabulary is the one there, so train.bin stays (it reads
     * as before), and no temporary file is left */
    CHECK(unlink(tmp_path("ds/val.bin")) == 0 && mkdir(tmp_path("ds/val.bin"), 0755) == 0, "val.bin replaced by a folder");
    write_file(tmp_path("ds/val.bin/keep"), "x", 1);
    rc = prepare_char(tmp_path("in2.txt"), tmp_path("ds"), 0.25, NULL, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && !strstr(err, "was removed") && file_exists(tmp_path("ds/train.bin")),
          "the same vocabulary: train.bin kept (%d %s)", rc, err);
    DIR *d = opendir(tmp_path("ds"));
    int temporaries = 0;
    for (struct dirent *e; d && (e = readdir(d)) != NULL;) temporaries += strstr(e->d_name, ".tmp.") != NULL;
    if (d) closedir(d);
    CHECK(temporaries == 0, "%d temporary files left", temporaries);
    unlink(tmp_path("ds/val.bin/keep"));
    rmdir(tmp_path("ds/val.bin"));

    /* a text of two characters at any val_fraction: a character each (0.6 cut train to none) */
    const char *two = "ab";
    write_file(tmp_path("two.txt"), two, 2);
    for (int k = 0; k < 2; k++) {
        rc = prepare_char(tmp_path("two.txt"), tmp_path("ds_two"), k ? 0.01 : 0.6, NULL, err, sizeof err);
        struct stat st_train, st_val;
        int sizes = !stat(tmp_path("ds_two/train.bin"), &st_train) && !stat(tmp_path("ds_two/val.bin"), &st_val);
        CHECK(rc == 0 && sizes && st_train.st_size == 2 && st_val.st_size == 2, "val_fraction %g: train %lld bytes, val %lld (%s)",
              k ? 0.01 : 0.6, sizes ? (long long)st_train.st_size : -1LL, sizes ? (long long)st_val.st_size : -1LL, err);
    }

    const char *invalid = "abc\xC3(def";
    write_file(tmp_path("bad.txt"), invalid, strlen(invalid));
    rc = prepare_char(tmp_path("bad.txt"), tmp_path("ds2"), 0.1, NULL, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "byte offset 3"), "invalid UTF-8 names the offset: %s", err);
    free(v);
}

static void test_prepare_tiny_shakespeare(void) {
    char path[512], err[NGPT_ERRLEN];
    snprintf(path, sizeof path, "%s/tinyshakespeare.txt", shared_data_dir());
    int rc = prepare_char(path, tmp_path("ts"), 0.1, NULL, err, sizeof err);
    CHECK(rc == 0, "%s", err);
    TokenFile tf, vf;
    CHECK(tokenfile_open(&tf, tmp_path("ts/train.bin"), 65, 2, 0, err, sizeof err) == 0, "%s", err);
    CHECK(tokenfile_open(&vf, tmp_path("ts/val.bin"), 65, 2, 0, err, sizeof err) == 0, "%s", err);
    /* nanoGPT's prepare.py prints: train has 1,003,854 tokens, val has 111,540 tokens, vocab size 65 */
    CHECK(tf.ntok == 1003854 && vf.ntok == 111540, "train %zu val %zu", tf.ntok, vf.ntok);
    tokenfile_close(&tf);
    tokenfile_close(&vf);
}

static void test_token_file_errors(void) {
    char err[NGPT_ERRLEN];
    TokenFile tf;
    uint16_t good[10] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 0};
    write_file(tmp_path("odd.bin"), good, 7);
    int rc = tokenfile_open(&tf, tmp_path("odd.bin"), 65, 2, 0, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "odd size") && strstr(err, "odd.bin"), "odd size: %s", err);
    write_file(tmp_path("empty.bin"), good, 0);
    rc = tokenfile_open(&tf, tmp_path("empty.bin"), 65, 2, 0, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "empty.bin is empty") && strstr(err, "at least block_size + 1 = 2 tokens (4 bytes"),
          "empty: names the size it needs: %s", err);
    write_file(tmp_path("short.bin"), good, 8);
    rc = tokenfile_open(&tf, tmp_path("short.bin"), 65, 65, 0, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "has 4 tokens") && strstr(err, "65"), "too short: %s", err);
    uint16_t badid[4] = {1, 2, 70, 3};
    write_file(tmp_path("badid.bin"), badid, sizeof badid);
    rc = tokenfile_open(&tf, tmp_path("badid.bin"), 65, 2, 0, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "token id 70 at byte offset 4") && strstr(err, "0..64"), "id out of range: %s", err);
    rc = tokenfile_open(&tf, tmp_path("nope.bin"), 65, 2, 0, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && strstr(err, "nope.bin"), "missing: %s", err);
    /* a FIFO where a token file should be: refused at once (opening it for reading would wait for a writer) */
    if (mkfifo(tmp_path("fifo.bin"), 0600) == 0) {
        rc = tokenfile_open(&tf, tmp_path("fifo.bin"), 65, 2, 0, err, sizeof err);
        CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "fifo.bin is not a regular file"), "a FIFO: %s", err);
    } else CHECK(0, "mkfifo %s: %s", tmp_path("fifo.bin"), strerror(errno));

    /* llm.c shards: header checked against the size */
    int32_t hdr[256] = {0};
    hdr[0] = LLMC_MAGIC; hdr[1] = 1; hdr[2] = 10;
    char buf[1024 + 20];
    memcpy(buf, hdr, 1024);
    memcpy(buf + 1024, good, 20);
    write_file(tmp_path("shard.bin"), buf, sizeof buf);
    rc = tokenfile_open(&tf, tmp_path("shard.bin"), 65, 2, 0, err, sizeof err);
    CHECK(rc == 0 && tf.llmc && tf.ntok == 10 && tf.tokens[2] == 3, "llm.c shard: %s", err);
    if (!rc) tokenfile_close(&tf);
    write_file(tmp_path("trunc.bin"), buf, sizeof buf - 6);
    rc = tokenfile_open(&tf, tmp_path("trunc.bin"), 65, 2, 0, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "header says 10 tokens") && strstr(err, "(truncated"), "truncated shard: %s", err);
    hdr[2] = 7; /* 3 tokens more in the file than the header counts */
    memcpy(buf, hdr, 1024);
    write_file(tmp_path("long.bin"), buf, sizeof buf);
    rc = tokenfile_open(&tf, tmp_path("long.bin"), 65, 2, 0, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "header says 7 tokens") && strstr(err, "bytes after the tokens") && !strstr(err, "truncated"),
          "a shard longer than its header says: %s", err);
    hdr[2] = -5;
    memcpy(buf, hdr, 1024);
    write_file(tmp_path("negative.bin"), buf, sizeof buf);
    rc = tokenfile_open(&tf, tmp_path("negative.bin"), 65, 2, 0, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "token count -5 at byte offset 8 is negative") && strstr(err, "room for 10 tokens"),
          "a negative token count: %s", err);
    hdr[2] = 10;
    hdr[1] = 2;
    memcpy(buf, hdr, 1024);
    write_file(tmp_path("v2.bin"), buf, sizeof buf);
    rc = tokenfile_open(&tf, tmp_path("v2.bin"), 65, 2, 0, err, sizeof err);
    CHECK(rc == NGPT_ERR_FORMAT && strstr(err, "version 2 at byte offset 4, expected 1"), "shard version: %s", err);
}

static void test_trainer_reports_data_errors(void) {
    /* a dataset whose val.bin is missing: the error names it, and nothing is left allocated */
    ngpt_config c;
    char err[NGPT_ERRLEN];
    ngpt_config_defaults(&c);
    apply_preset(&c, preset_shakespeare_char_cpu);
    copy_str(c.device, sizeof c.device, "cpu");
    mkdir(tmp_path("half"), 0777);
    uint16_t toks[200] = {0};
    write_file(tmp_path("half/train.bin"), toks, sizeof toks);
    copy_str(c.data_dir, sizeof c.data_dir, tmp_path("half"));
    c.vocab_size = 65;
    ngpt_trainer *tr = NULL;
    int rc = ngpt_trainer_create(&c, NULL, &tr, err, sizeof err);
    CHECK(rc == NGPT_ERR_IO && tr == NULL && strstr(err, "half has no val.bin"), "missing val.bin: %s", err);
}

/* fields set in the struct, not through ngpt_config_set: the trainer checks them as ngpt_config_set would (n_head 0
 * divided by zero, eval_iters -3 indexed before an array), before it reads any data */
static void test_struct_fields_validated(void) {
    struct { const char *key, *want; } cases[] = {
        {"n_head", "n_head = '0': must be an integer in [1, 1024]"},
        {"eval_iters", "eval_iters = '-3': must be an integer in [1, 1000000000]"},
        {"dropout", "dropout = '2': must be a number in [0, 0.99]"},
        {"recompute", "recompute = '7': must be an integer in [-1, 3]"},
        {"on_nonfinite", "on_nonfinite = 'zzz': must be one of skip|halt"},
        {"max_memory", "max_memory = '-5B': must be a size with a unit"},
        {"dataset", "dataset: the string is not terminated within its"},
        /* each within its range, their products not: the step's and the evaluation's sequences are counted in an int */
        {"batch_size", "batch_size x gradient_accumulation_steps = 65536 x 65536 = 4294967296 sequences a step: at most 2147483647"},
        {"eval_iters", "eval_iters x batch_size = 8590 x 1000000 = 8590000000 sequences an evaluation of each split: at most 2147483647"},
        {"beta2", "beta2 = '1': must be a number in [0, 0.999999999]"}, /* (%g printed the bound as 1, the value refused) */
        {"bias", "bias = 2: a boolean field holds 0 (False) or 1 (True)"}, /* (printed True, it passed; its checkpoint loaded nowhere) */
        {"beta1", "beta1 = '1': must be a number in [0, 0.999999]"}, /* 1 - beta1^t would be 0: AdamW's first step divides by it */
        {"out_dir", "out_dir is empty: name a folder"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ngpt_config c;
        char err[NGPT_ERRLEN] = "";
        ngpt_config_defaults(&c);
        copy_str(c.device, sizeof c.device, "cpu");
        copy_str(c.data_dir, sizeof c.data_dir, tmp_path("no_such_data")); /* never reached */
        switch (i) {
        case 0: c.n_head = 0; break;
        case 1: c.eval_iters = -3; break;
        case 2: c.dropout = 2; break;
        case 3: c.recompute = 7; break;
        case 4: copy_str(c.on_nonfinite, sizeof c.on_nonfinite, "zzz"); break;
        case 5: c.max_memory = -5; break;
        case 6: memset(c.dataset, 'x', sizeof c.dataset); break;
        case 7: c.batch_size = c.gradient_accumulation_steps = 65536; break;
        case 8: c.batch_size = 1000000; c.eval_iters = 8590; break;
        case 9: c.beta2 = 1; break;
        case 10: c.bias = 2; break;
        case 11: c.beta1 = 1; break;
        default: c.out_dir[0] = 0; break;
        }
        ngpt_trainer *tr = NULL;
        int rc = ngpt_trainer_create(&c, NULL, &tr, err, sizeof err);
        CHECK(rc == NGPT_ERR_ARG && tr == NULL && strstr(err, cases[i].want), "%s set in the struct: rc %d: %s", cases[i].key, rc, err);
    }
}

/* the CPU budget without max_memory: 90% of what Linux says is available (MemAvailable, with the page cache
 * the kernel gives back), not of the free pages alone; without the line (Linux before 3.14), the free pages */
static void test_cpu_budget_is_available_memory(void) {
    static const char meminfo[] = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n"
                                  "Buffers:          100000 kB\nCached:         18000000 kB\n";
    FILE *f = fmemopen((void *)meminfo, sizeof meminfo - 1, "r");
    CHECK(f && meminfo_available(f) == 20000000.0 * 1024, "MemAvailable read, not MemFree");
    if (f) fclose(f);
    static const char old_kernel[] = "MemTotal:       24000000 kB\nMemFree:         1000000 kB\nCached:         18000000 kB\n";
    f = fmemopen((void *)old_kernel, sizeof old_kernel - 1, "r");
    CHECK(f && meminfo_available(f) == 0, "no MemAvailable line: 0, for the free pages to be used");
    if (f) fclose(f);
    /* the budget: 90% of MemAvailable, else of the free pages, else a guess of 4 GiB */
    CHECK(host_budget(20e9, 1000, 4096) == 0.9 * 20e9, "MemAvailable's 90%%: %.0f", host_budget(20e9, 1000, 4096));
    CHECK(host_budget(0, 1000, 4096) == 0.9 * 1000 * 4096, "the free pages' 90%%: %.0f", host_budget(0, 1000, 4096));
    CHECK(host_budget(0, -1, 4096) == 4.0 * GiB && host_budget(0, 1000, -1) == 4.0 * GiB, "nothing known: 4 GiB");
    /* and this machine's, read from its /proc/meminfo (which changes between two reads: within 5%), or what its
     * cgroups' memory limit leaves where that is less */
    f = fopen("/proc/meminfo", "r");
    char cgroups[4096];
    double avail = meminfo_available(f), got = host_memory_available(), left = cgroup_memory_left("/sys/fs/cgroup", own_cgroups(cgroups, sizeof cgroups));
    if (f) fclose(f);
    if (left >= 0 && left < avail) avail = left;
    CHECK(avail > 0 && fabs(got - 0.9 * avail) < 0.05 * avail, "budget %.3f GiB, 90%% of MemAvailable %.3f GiB", got / GiB, avail / GiB);
}

/* text into the file root/name */
static void write_text(const char *root, const char *name, const char *text) {
    char path[400];
    snprintf(path, sizeof path, "%s/%s", root, name);
    FILE *f = fopen(path, "w");
    CHECK(f && fputs(text, f) >= 0, "cannot write %s", path);
    if (f) fclose(f);
}

/* A container's limits, in cgroup folders made here as Linux shows them: the memory a limit leaves (the limit, less
 * what is used, less the page cache the kernel takes back first), the smallest of this process's folder's and those
 * above it; the CPUs of a quota; none where there is no limit; and the CPUs an affinity (taskset) allows */
static void test_cgroup_limits(void) {
    char root[270], dir[300];
    snprintf(root, sizeof root, "%s/cgroup", tmpdir);
    /* v2: one hierarchy; this process in /a/b, a limit on each, the deeper one smaller; a CPU quota of 1.5. (v1's
     * folders, made with them: the controllers' own) */
    static const char *const dirs[] = {"", "/a", "/a/b", "/memory", "/cpu,cpuacct"};
    for (int i = 0; i < 5; i++) {
        snprintf(dir, sizeof dir, "%s%s", root, dirs[i]);
        mkdir(dir, 0777);
    }
    write_text(root, "a/memory.max", "1000000000\n");
    write_text(root, "a/memory.current", "300000000\n");
    write_text(root, "a/memory.stat", "anon 200000000\ninactive_file 100000000\nactive_file 5\n");
    write_text(root, "a/b/memory.max", "max\n");
    write_text(root, "a/cpu.max", "max 100000\n");
    write_text(root, "a/b/cpu.max", "150000 100000\n");
    double left = cgroup_memory_left(root, "0::/a/b\n"), cpus = cgroup_cpu_quota(root, "0::/a/b\n");
    CHECK(left == 8e8, "v2: 1e9 less 3e8 used of which 1e8 is cache: %.0f", left);
    CHECK(cpus == 1.5, "v2: a quota of 150000 per 100000: %g CPUs", cpus);
    write_text(root, "a/b/memory.max", "500000000\n");
    write_text(root, "a/b/memory.current", "100000000\n");
    left = cgroup_memory_left(root, "0::/a/b\n");
    CHECK(left == 4e8, "v2: the folder's own limit, smaller than the one above: %.0f", left);
    CHECK(cgroup_memory_left(root, "0::/a\n") == 8e8, "v2: from /a, the limit below it does not count");
    CHECK(cgroup_memory_left(root, "0::/\n") == -1 && cgroup_cpu_quota(root, "0::/\n") == -1, "v2: the root has no limit");
    CHECK(cgroup_memory_left(root, "") == -1 && cgroup_cpu_quota(root, "") == -1, "no cgroups: no limit");
    /* v1, a container's: the host's path (not there) under the controllers' folders, the container's limits at their
     * roots; the CPU controller mounted as "cpu,cpuacct"; the v2 line after them ignored */
    static const char v1[] = "12:pids:/docker/f00d\n4:memory:/docker/f00d\n2:cpu,cpuacct:/docker/f00d\n0::/\n";
    write_text(root, "memory/memory.limit_in_bytes", "2147483648\n");
    write_text(root, "memory/memory.usage_in_bytes", "1073741824\n");
    write_text(root, "memory/memory.stat", "cache 9\ninactive_file 1\ntotal_inactive_file 536870912\n");
    write_text(root, "cpu,cpuacct/cpu.cfs_quota_us", "200000\n");
    write_text(root, "cpu,cpuacct/cpu.cfs_period_us", "100000\n");
    left = cgroup_memory_left(root, v1), cpus = cgroup_cpu_quota(root, v1);
    CHECK(left == 1.5 * GiB, "v1: 2 GiB less 1 GiB used of which 0.5 GiB is cache: %.0f", left);
    CHECK(cpus == 2, "v1: a quota of 200000 per 100000: %g CPUs", cpus);
    /* v1 with the limit on a folder above, not seen from here (a pod's): memory.stat's hierarchical_memory_limit */
    write_text(root, "memory/memory.limit_in_bytes", "9223372036854771712\n");
    write_text(root, "memory/memory.stat", "hierarchical_memory_limit 3221225472\ntotal_inactive_file 536870912\n");
    CHECK(cgroup_memory_left(root, v1) == 2.5 * GiB, "v1: 3 GiB above, less 1 GiB used of which 0.5 GiB is cache: %.0f", cgroup_memory_left(root, v1));
    write_text(root, "memory/memory.stat", "hierarchical_memory_limit 9223372036854771712\ntotal_inactive_file 536870912\n");
    /* v1 without limits: a limit near 2^63, a quota of -1 */
    write_text(root, "memory/memory.limit_in_bytes", "9223372036854771712\n");
    write_text(root, "cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
    CHECK(cgroup_memory_left(root, v1) == -1 && cgroup_cpu_quota(root, v1) == -1, "v1: no limits");
    /* a limit below what is used leaves nothing */
    write_text(root, "memory/memory.limit_in_bytes", "536870912\n");
    CHECK(cgroup_memory_left(root, v1) == 0, "v1: used past the limit: %.0f", cgroup_memory_left(root, v1));
    CHECK(!remove_folder(root), "remove %s", root);
    /* the affinity: this process on its first allowed CPU alone is one CPU, whatever the machine has */
    cpu_set_t was, one;
    if (sched_getaffinity(0, sizeof was, &was)) { CHECK(0, "sched_getaffinity: %s", strerror(errno)); return; }
    CPU_ZERO(&one);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, &was)) { CPU_SET(c, &one); break; }
    CHECK(sched_setaffinity(0, sizeof one, &one) == 0, "sched_setaffinity: %s", strerror(errno));
    int online = 0, n = usable_cpus(&online);
    CHECK(n == 1 && online >= 1, "on one CPU: %d usable of %d online", n, online);
    CHECK(sched_setaffinity(0, sizeof was, &was) == 0, "restore the affinity: %s", strerror(errno));
}

/* dtype names to GPU storage types; "auto" is bf16 unless the card lacks it (compute capability below 8.0) */
static void test_dtype_choice(void) {
    CHECK(cuda_dtype("float32", 75) == NGPT_DTYPE_F32 && cuda_dtype("float16", 90) == NGPT_DTYPE_F16 &&
              cuda_dtype("bfloat16", 75) == NGPT_DTYPE_BF16,
          "named dtypes are taken as given");
    CHECK(cuda_dtype("auto", 75) == NGPT_DTYPE_F16, "auto on a T4 (7.5, no bf16) gives %d, not float16", cuda_dtype("auto", 75));
    CHECK(cuda_dtype("auto", 80) == NGPT_DTYPE_BF16 && cuda_dtype("auto", 90) == NGPT_DTYPE_BF16, "auto on 8.0 / 9.0 is not bfloat16");
    CHECK(cuda_dtype("auto", 0) == NGPT_DTYPE_BF16, "auto with no card to ask (nanogpt plan) is not bfloat16");
    ngpt_config c;
    ngpt_config_defaults(&c);
    snprintf(c.device, sizeof c.device, "cpu");
    snprintf(c.dtype, sizeof c.dtype, "bfloat16");
    int device = -1, dtype = -1;
    char note[NGPT_ERRLEN], err[NGPT_ERRLEN];
    CHECK(resolve_device(&c, &device, &dtype, note, sizeof note, err, sizeof err) == NGPT_OK && device == DEV_BACKEND_CPU &&
              dtype == NGPT_DTYPE_F32 && strstr(note, "float32"),
          "device cpu computes in float32 and says so: %s", note);
    /* device auto in a build without CUDA: one note says where it trains and why, the dtype after it */
    snprintf(c.device, sizeof c.device, "auto");
    CHECK(resolve_device(&c, &device, &dtype, note, sizeof note, err, sizeof err) == NGPT_OK && device == DEV_BACKEND_CPU &&
              !strcmp(note, "training on the CPU: this nanogpt was built without CUDA, which ./build.sh adds where nvcc is installed; "
                            "dtype = bfloat16: the CPU backend computes in float32"),
          "device auto without CUDA: %s", note);
}

int main(void) {
    if (test_folder(tmpdir, sizeof tmpdir, "config")) return 1;
    RUN(test_set_and_validate);
    RUN(test_value_edges);
    RUN(test_defaults_are_train_py);
    RUN(test_value_forms);
    RUN(test_bom_and_stored_quotes);
    RUN(test_config_file);
    RUN(test_nanogpt_python_configs);
    RUN(test_text_after_quote);
    RUN(test_device_strings);
    RUN(test_print_load_round_trip);
    RUN(test_presets_match_files);
    RUN(test_lr_schedule);
    RUN(test_fmt_duration);
    RUN(test_prepare_char);
    RUN(test_prepare_tiny_shakespeare);
    RUN(test_token_file_errors);
    RUN(test_trainer_reports_data_errors);
    RUN(test_struct_fields_validated);
    RUN(test_dtype_choice);
    RUN(test_cpu_budget_is_available_memory);
    RUN(test_cgroup_limits);
    remove_folder(tmpdir);
    return check_summary();
}
