"""The Python bindings (bindings/python) over the built librewind.so, on the
fixture models: the C layouts and function list match include/rewind.h,
errors are typed, greedy tokens equal llama.cpp's goldens, batched answers
equal solo ones, rewind and state files are bitwise exact.

Run by tests/python/test_python.sh (REWIND_LIBRARY names the library,
RW_FIXTURES the fixtures). Without fixtures the model tests are skipped."""

import gc
import json
import hashlib
import os
import random
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import threading
import unittest

import rewind
from rewind import _ffi, errors

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FX = os.environ.get("RW_FIXTURES", os.path.join(ROOT, "..", "shared", "fixtures"))
QWEN3 = os.path.join(FX, "qwen3", "qwen3-F32.gguf")
QWEN35 = os.path.join(FX, "qwen35", "qwen35-Q8_0.gguf")
HAVE_FIXTURES = os.path.exists(QWEN3) and os.path.exists(QWEN35)
needs_fixtures = unittest.skipUnless(HAVE_FIXTURES, "no fixture models at %s" % FX)


def golden(name):
    with open(os.path.join(FX, name.split("-")[0], name + ".json")) as f:
        d = json.load(f)
    ids = d["prompt_ids"]
    return (json.loads(ids) if isinstance(ids, str) else ids), d["greedy_ids"]


def argmax(xs):
    return max(range(len(xs)), key=xs.__getitem__)


class TestLibrary(unittest.TestCase):
    """What needs no model: the binding's view of the C API."""

    def test_version_and_architectures(self):
        self.assertEqual(rewind.library_version().split(".")[:2], [str(v) for v in _ffi.HEADER_VERSION])
        archs = rewind.architectures()
        self.assertIn("qwen3", archs)
        self.assertIn("qwen35", archs)

    def test_process_settings(self):
        best = rewind.kernels()
        with self.assertRaises(rewind.InvalidArgumentError):
            rewind.set_kernels("sse9")
        with self.assertRaises(rewind.InvalidArgumentError):
            rewind.set_numerics("fastest")
        rewind.set_kernels("ref")
        self.assertEqual(rewind.kernels(), "ref")
        rewind.set_kernels(None)
        self.assertEqual(rewind.kernels(), best)
        rewind.set_numerics(None)
        self.assertEqual(rewind.numerics(), "auto")
        if HAVE_FIXTURES and best != "ref":
            with rewind.Model(QWEN3):
                with self.assertRaises(rewind.BusyError):
                    rewind.set_kernels("ref")
                rewind.set_kernels(best)  # the tier in use: fine

    def test_functions_match_header(self):
        with open(os.path.join(ROOT, "include", "rewind.h")) as f:
            src = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
        src = re.sub(r"#define[^\n]*(\\\n[^\n]*)*", "", src)
        declared = set(re.findall(r"\b(rw_[a-z0-9_]+)\s*\((?!\s*\*)", src)) - {"rw_log_fn", "rw_text_fn", "rw_event_fn"}
        declared = {n for n in declared if not re.search(r"\(\s*\*\s*%s\s*\)" % n, src)}
        # the header's inline functions (the sized structs' *_default) are
        # not in the library: the bindings make them over *_init
        inline = set(re.findall(r"static inline [^(]*\b(rw_[a-z0-9_]+)\s*\(", src))
        self.assertTrue(inline)
        lib = _ffi.load()
        for n in inline:
            self.assertTrue(callable(getattr(lib, n, None)), n)
        declared -= inline
        ours = set(_ffi.FUNCTIONS)
        self.assertEqual(declared - ours, set(), "functions of include/rewind.h the bindings do not wrap")
        self.assertEqual(ours - declared, set(), "functions the bindings declare that include/rewind.h does not")

    def test_struct_layouts_match_header(self):
        cc = shutil.which(os.environ.get("CC", "cc"))
        if not cc:
            self.skipTest("no C compiler to read the header's layouts")
        lines = ['#include <stdio.h>', '#include <stddef.h>', '#include "rewind.h"', "int main(void) {"]
        for name, cls in _ffi.STRUCTS.items():
            lines.append('printf("%s %%zu\\n", sizeof(%s));' % (name, name))
            for field, _ in cls._fields_:
                lines.append('printf("%s.%s %%zu\\n", offsetof(%s, %s));' % (name, field, name, field))
        lines.append("return 0; }")
        with tempfile.TemporaryDirectory() as tmp:
            c = os.path.join(tmp, "layout.c")
            with open(c, "w") as f:
                f.write("\n".join(lines))
            exe = os.path.join(tmp, "layout")
            subprocess.run([cc, "-std=c17", "-I", os.path.join(ROOT, "include"), c, "-o", exe], check=True)
            got = dict(l.split() for l in subprocess.run([exe], capture_output=True, text=True, check=True)
                       .stdout.splitlines())
        for name, cls in _ffi.STRUCTS.items():
            self.assertEqual(int(got[name]), ctypes_sizeof(cls), name)
            for field, _ in cls._fields_:
                self.assertEqual(int(got[name + "." + field]), getattr(cls, field).offset, name + "." + field)

    def test_every_status_has_its_class(self):
        lib = _ffi.load()
        for code in range(1, 64):
            name = lib.rw_status_name(code).decode()
            if name == "ERR_UNKNOWN":
                break
            self.assertIn(name, errors.BY_STATUS, "no error class for %s" % name)
            self.assertEqual(_ffi.status_code(name), code)
        else:
            self.fail("rw_status_name never said ERR_UNKNOWN")

    def test_log_handler(self):
        lines = []
        rewind.set_log_handler(lambda level, msg: lines.append((level, msg)), rewind.LOG_DEBUG)
        rewind.set_log_handler(None)
        self.assertEqual(lines, [])

    def test_missing_file_is_typed_error(self):
        with self.assertRaises(rewind.IOFailureError) as cm:
            rewind.Model("/nonexistent/model.gguf")
        e = cm.exception
        self.assertIsInstance(e, rewind.RewindError)
        self.assertIsInstance(e, OSError)
        self.assertEqual(e.status, "ERR_IO")
        self.assertEqual(e.code, _ffi.status_code("ERR_IO"))
        self.assertIn("/nonexistent/model.gguf", e.message)
        self.assertTrue(str(e).startswith("ERR_IO: "))

    def test_not_a_gguf_is_format_error(self):
        with tempfile.NamedTemporaryFile(suffix=".gguf") as f:
            f.write(b"this is not a gguf file" * 10)
            f.flush()
            with self.assertRaises(rewind.FormatError) as cm:
                rewind.Model(f.name)
        self.assertEqual(cm.exception.status, "ERR_FORMAT")


def ctypes_sizeof(cls):
    import ctypes

    return ctypes.sizeof(cls)


@needs_fixtures
class TestModel(unittest.TestCase):
    """A dense model (qwen3, F32) against llama.cpp's goldens."""

    @classmethod
    def setUpClass(cls):
        cls.m = rewind.Model(QWEN3)
        cls.prompt_ids, cls.greedy = golden("qwen3-F32")
        cls.chat = cls.m.render_chat([{"role": "user", "content": "Say something short."}])

    @classmethod
    def tearDownClass(cls):
        cls.m.close()

    def test_metadata(self):
        self.assertEqual(self.m.arch, "qwen3")
        self.assertEqual(self.m.n_vocab, 512)
        self.assertGreater(self.m.n_ctx_train, 0)
        self.assertIn("qwen3", repr(self.m))

    def test_tokenize_round_trip(self):
        text = "Hello world, the rewind engine."
        ids = self.m.tokenize(text, add_special=False)
        self.assertTrue(ids and all(0 <= i < self.m.n_vocab for i in ids))
        self.assertEqual(self.m.detokenize(ids), text)
        self.assertEqual(self.m.detokenize_bytes(ids), text.encode())
        self.assertEqual(self.m.tokenize(text.encode(), add_special=False), ids)
        # control-token text is one token with parse_special only
        special = self.m.tokenize("<|im_start|>", add_special=False, parse_special=True)
        self.assertEqual(len(special), 1)
        self.assertGreater(len(self.m.tokenize("<|im_start|>", add_special=False)), 1)
        self.assertEqual(self.m.detokenize(special, render_special=True), "<|im_start|>")

    def test_render_chat(self):
        msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
        plain = self.m.render_chat(msgs)
        self.assertIn("Be brief.", plain)
        self.assertTrue(plain.endswith("assistant\n"), plain)
        # the JSON path (rw_chat_render_json) renders the same conversation alike
        self.assertEqual(self.m.render_chat(msgs, enable_thinking=False), plain)
        self.assertEqual(self.m.render_chat([("system", "Be brief."), ("user", "Hi")]), plain)
        self.assertFalse(self.m.render_chat(msgs, add_generation_prompt=False).endswith("assistant\n"))

    def test_quantize(self):
        # the qwen3 F32 fixture to Q4_K_M is llama-quantize's file byte for
        # byte, and it loads; a bad type is an InvalidArgumentError
        self.assertIn("Q4_K_M", rewind.quantize_types())
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "q.gguf")
            rewind.quantize(QWEN3, out, "q4_k_m", threads=1)
            with open(out, "rb") as f, open(QWEN3.replace("-F32", "-Q4_K_M"), "rb") as g:
                self.assertEqual(f.read(), g.read())
            with rewind.Model(out) as m:
                self.assertEqual(m.n_vocab, self.m.n_vocab)
            with self.assertRaises(rewind.InvalidArgumentError):
                rewind.quantize(QWEN3, out, "Q4_K_X")
            rewind.quantize(QWEN3, out, "q8_0", output_type="q6_k")
            with rewind.Model(out) as m:
                self.assertEqual(m.arch, "qwen3")
            with self.assertRaises(rewind.InvalidArgumentError):
                rewind.quantize(QWEN3, out, "q8_0", token_embd_type="q9_9")
            # with llama-imatrix's matrix: llama-quantize --imatrix's file
            # (the hash test_quantize_imatrix.sh holds; the path as given is
            # recorded, so run beside the matrix)
            data = os.path.join(ROOT, "tests", "quantize", "data")
            cwd, src = os.getcwd(), os.path.abspath(QWEN3)
            os.chdir(data)
            try:
                rewind.quantize(src, out, "Q4_K_M", imatrix="qwen3.imatrix.dat")
            finally:
                os.chdir(cwd)
            with open(os.path.join(data, "imatrix_golden.txt")) as f:
                lines = f.read().splitlines()
            want = [l.split()[4] for l in lines if l.startswith("qwen3 qwen3.imatrix.dat - Q4_K_M ")][0]
            made_from = [l.split()[3] for l in lines if l.startswith("#   fixture qwen3 ")][0]
            with open(QWEN3, "rb") as f:
                same_fixture = hashlib.sha256(f.read()).hexdigest() == made_from
            with open(out, "rb") as f:
                if same_fixture:
                    self.assertEqual(hashlib.sha256(f.read()).hexdigest(), want)
            with self.assertRaises(rewind.IOFailureError):
                rewind.quantize(QWEN3, out, "Q4_K_M", imatrix=os.path.join(d, "none.dat"))
            # --tensor-type: the named tensors get the type
            rewind.quantize(QWEN3, out, "Q4_K_M", tensor_types=["attn_q=q8_0", r"blk\.\d+\.ffn_up=q5_0"])
            j = json.loads(subprocess.check_output([os.path.join(os.path.dirname(os.environ.get(
                "REWIND_LIBRARY", os.path.join(ROOT, "build", "x"))), "rewind"), "inspect", out, "--json"]))
            types = {t["name"]: t["type"] for t in j["tensors"]}
            self.assertEqual(types["blk.0.attn_q.weight"].upper(), "Q8_0")
            self.assertEqual(types["blk.0.ffn_up.weight"].upper(), "Q5_0")
            with self.assertRaises(rewind.InvalidArgumentError):
                rewind.quantize(QWEN3, out, "Q4_K_M", tensor_types="attn_q=q9_9")

    def test_imatrix(self):
        # statistics of 2 chunks of 32 tokens: saved in llama-imatrix's
        # layout (64 rows counted per matrix), and quantize takes them
        ids = (self.prompt_ids * 8)[:64]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "m.imatrix.gguf")
            with self.m.imatrix() as im:
                with self.assertRaises(rewind.InvalidArgumentError):
                    im.save(path)  # nothing seen yet
                for c in range(2):
                    with self.m.seq(n_ctx=64) as s:
                        s.eval(ids[32 * c:32 * c + 32])
                im.save(path, dataset="ids", chunks=2, chunk_size=32)
            rw = os.path.join(os.path.dirname(os.environ.get("REWIND_LIBRARY", os.path.join(ROOT, "build", "x"))), "rewind")
            out = subprocess.check_output([rw, "inspect", path, "--json"])
            j = json.loads(out)
            self.assertEqual(j["metadata"]["imatrix.datasets"], ["ids"])
            counts = [t for t in j["tensors"] if t["name"].endswith(".counts")]
            self.assertGreater(len(counts), 0)
            with open(path, "rb") as f:
                data = f.read()
            for t in counts:
                self.assertEqual(struct.unpack("<f", data[t["offset"]:t["offset"] + 4])[0], 64.0)
            rewind.quantize(QWEN3, os.path.join(d, "q.gguf"), "Q4_K_M", imatrix=path)

    def test_gguf_split(self):
        # the qwen3 fixture split 20 tensors a part opens from its first part
        # and computes the one file's logits bit for bit; a later part is an
        # InvalidArgumentError naming the first; the merge runs the same
        with tempfile.TemporaryDirectory() as d:
            n = rewind.gguf_split(QWEN3, os.path.join(d, "m"), max_tensors=20)
            self.assertGreater(n, 1)
            first = os.path.join(d, "m-00001-of-%05d.gguf" % n)
            with rewind.Model(first) as m, m.seq(n_ctx=64, kv_f32=True) as s, \
                    self.m.seq(n_ctx=64, kv_f32=True) as t:
                self.assertEqual(s.eval(self.prompt_ids[:8]), t.eval(self.prompt_ids[:8]))
            with self.assertRaises(rewind.InvalidArgumentError) as cm:
                rewind.Model(os.path.join(d, "m-00002-of-%05d.gguf" % n))
            self.assertIn(first, str(cm.exception))
            rewind.gguf_merge(first, os.path.join(d, "merged.gguf"))
            with rewind.Model(os.path.join(d, "merged.gguf")) as m:
                self.assertEqual(m.n_vocab, self.m.n_vocab)

    def test_lora(self):
        # an adapter on blk.0.attn_q (make_lora.py's writer): scale 0 is the
        # model's own logits bit for bit, 0.5 changes them; listed; a model
        # file is no adapter
        sys.path.insert(0, os.path.join(ROOT, "tests", "models"))
        import make_lora

        rng = random.Random(5)
        a = struct.pack("<1024f", *[rng.gauss(0, 0.5) for _ in range(1024)])  # {256, 4}
        b = struct.pack("<2048f", *[rng.gauss(0, 0.5) for _ in range(2048)])  # {4, 512}
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "a.gguf")
            kvs = [("general.architecture", "str", "qwen3"), ("general.type", "str", "adapter"),
                   ("adapter.type", "str", "lora"), ("adapter.lora.alpha", "f32", 4.0)]
            make_lora.write_gguf(path, kvs, [("blk.0.attn_q.weight.lora_a", [256, 4], 0, a),
                                             ("blk.0.attn_q.weight.lora_b", [4, 512], 0, b)])
            ids = self.prompt_ids[:8]
            with self.m.seq(n_ctx=64, kv_f32=True) as s:
                own = s.eval(ids)
            for scale in (0.0, 0.5):
                with rewind.Model(QWEN3, lora=[(path, scale)]) as m:
                    self.assertEqual(m.lora, [(path, scale)])
                    with m.seq(n_ctx=64, kv_f32=True) as s:
                        got = s.eval(ids)
                    if scale == 0.0:
                        self.assertEqual(list(got), list(own))
                    else:
                        self.assertGreater(max(abs(x - y) for x, y in zip(got, own)), 0.01)
            self.assertEqual(self.m.lora, [])
            with self.assertRaises(rewind.RewindError) as cm:
                rewind.Model(QWEN3, lora=[QWEN3])
            self.assertIn("not an adapter", str(cm.exception))

    def test_seq_greedy_equals_golden(self):
        with self.m.seq(n_ctx=512, kv_f32=True) as s:
            logits = s.eval(self.prompt_ids)
            self.assertEqual(len(logits), self.m.n_vocab)
            out = []
            for _ in range(16):
                t = argmax(logits)
                out.append(t)
                logits = s.eval([t])
            self.assertEqual(len(s), len(self.prompt_ids) + 16)
            s.rewind(len(self.prompt_ids) - 1)
            again = s.greedy(s.eval(self.prompt_ids[-1:]), 16, stop_at_eog=False)
            self.assertEqual(len(s), len(self.prompt_ids) + 15)
        self.assertEqual(out, self.greedy[:16])
        self.assertEqual(again, out)

    def test_engine_ids_equal_golden(self):
        with rewind.Engine(self.m, n_ctx=512, kv_f32=True) as e:
            c = e.submit(self.prompt_ids, max_tokens=8, ignore_eos=True).result(timeout=60)
        self.assertEqual(c.completion_tokens, 8)
        self.assertEqual(c.prompt_tokens, len(self.prompt_ids))
        self.assertEqual(c.finish_reason, "length")
        self.assertEqual(c.text, self.m.detokenize(self.greedy[:8]))

    def test_generate_stream_and_callback_agree(self):
        c = self.m.generate(self.chat, max_tokens=12, ignore_eos=True)
        self.assertEqual(c.completion_tokens, 12)
        self.assertEqual(c.finish_reason, "length")
        pieces = []
        self.assertEqual(self.m.generate(self.chat, max_tokens=12, ignore_eos=True, on_text=pieces.append).text, c.text)
        self.assertEqual("".join(pieces), c.text)
        with self.m.stream(self.chat, max_tokens=12, ignore_eos=True) as st:
            streamed = list(st)
        self.assertGreater(len(streamed), 1)
        self.assertEqual("".join(streamed), c.text)
        self.assertEqual(st.completion.text, c.text)

    def test_stop_early(self):
        pieces = []

        def first_only(p):
            pieces.append(p)
            return False

        c = self.m.generate(self.chat, max_tokens=64, ignore_eos=True, on_text=first_only)
        self.assertEqual(len(pieces), 1)
        self.assertEqual(c.finish_reason, "stop")
        self.assertEqual(c.text, pieces[0])
        # a stream left after its first piece stops its generation
        st = self.m.stream(self.chat, max_tokens=1000, ignore_eos=True, n_ctx=2048)
        next(iter(st))
        st.close()
        self.assertFalse(st._thread.is_alive())

    def test_callback_exception_reaches_caller(self):
        def boom(p):
            raise KeyError("from the callback")

        with self.assertRaises(KeyError):
            self.m.generate(self.chat, max_tokens=8, on_text=boom)

    def test_option_errors(self):
        with self.assertRaises(rewind.InvalidArgumentError) as cm:
            self.m.generate(self.chat, max_tokens=4, grammar="root ::= (")
        self.assertEqual(cm.exception.status, "ERR_INVALID_ARG")
        with self.assertRaises(rewind.ContextOverflowError):
            self.m.generate(self.chat, max_tokens=100, n_ctx=64)
        with self.assertRaises(TypeError):
            self.m.generate(self.chat, max_tokenz=4)

    def test_grammar_and_schema(self):
        c = self.m.generate(self.chat, max_tokens=16, grammar='root ::= "yes" | "no"')
        self.assertIn(c.text, ("yes", "no"))
        c = self.m.generate(self.chat, max_tokens=64, temperature=0.8, seed=7,
                            json_schema={"type": "object", "properties": {"a": {"type": "integer"}},
                                         "required": ["a"], "additionalProperties": False})
        if c.finish_reason == "stop":
            self.assertIsInstance(json.loads(c.text)["a"], int)

    def test_sampling_seed_repeats(self):
        a = self.m.generate(self.chat, max_tokens=12, temperature=0.9, top_k=40, seed=123, ignore_eos=True)
        b = self.m.generate(self.chat, max_tokens=12, temperature=0.9, top_k=40, seed=123, ignore_eos=True)
        self.assertEqual(a.text, b.text)
        other = self.m.generate(self.chat, max_tokens=12, temperature=0.9, top_k=40, seed=124, ignore_eos=True)
        self.assertNotEqual(other.text, a.text, "the seed and temperature did not reach the sampler")
        greedy = self.m.generate(self.chat, max_tokens=12, ignore_eos=True)
        self.assertNotEqual(greedy.text, a.text)
        # a stop string cuts the output where it starts
        word = a.text.split()[1]
        cut = self.m.generate(self.chat, max_tokens=12, temperature=0.9, top_k=40, seed=123, ignore_eos=True,
                              stop=[word, "never in the output"])
        self.assertEqual(cut.text, a.text[: a.text.index(word)])
        self.assertEqual(cut.finish_reason, "stop")

    def test_engine_owns_the_forward_passes(self):
        s = self.m.seq(n_ctx=256)
        with rewind.Engine(self.m, n_ctx=256) as e:
            with self.assertRaises(rewind.BusyError):
                s.eval([1, 2, 3])
            with self.assertRaises(rewind.BusyError):
                self.m.generate(self.chat, max_tokens=2)
            with self.assertRaises(rewind.BusyError):
                rewind.Engine(self.m)
            self.assertEqual(len(e.run(self.chat, max_tokens=2, ignore_eos=True).text) > 0, True)
        s.eval([1, 2, 3])  # the engine is gone: the model's passes are free again
        s.close()
        s.close()  # idempotent
        with self.assertRaises(ValueError):
            s.eval([1])

    def test_close_model_closes_children(self):
        m = rewind.Model(QWEN3)
        s = m.seq(n_ctx=64)
        e = rewind.Engine(m, n_ctx=64, manual=True)
        m.close()
        self.assertTrue(m.closed and e.closed)
        with self.assertRaises(ValueError):
            len(s)
        with self.assertRaises(ValueError):
            m.tokenize("x")
        m.close()

    def test_del_frees(self):
        # objects dropped without close() are freed by the collector
        for _ in range(3):
            m = rewind.Model(QWEN3)
            m.seq(n_ctx=64)
            del m
            gc.collect()


@needs_fixtures
class TestEngine(unittest.TestCase):
    """Several requests in flight on a hybrid model (qwen35): each one's
    answer is exactly what it is alone."""

    @classmethod
    def setUpClass(cls):
        cls.m = rewind.Model(QWEN35)
        system = "You are a test. " + "Repeat the words you are given and nothing else. " * 4
        words = ["apple pie", "blue river", "quiet storm", "seven lamps", "paper moon"]
        cls.prompts = [cls.m.render_chat([("system", system), ("user", w)]) for w in words]
        cls.solo = [cls.m.generate(p, max_tokens=10, ignore_eos=True, n_ctx=512).text for p in cls.prompts]

    @classmethod
    def tearDownClass(cls):
        cls.m.close()

    def test_embed_and_rerank(self):
        """Embeddings: unit length, dimensions cut, the same from text and
        from its ids, batched or cached; rerank scores in [0, 1]."""
        with rewind.Engine(self.m, n_ctx=512, max_running=4) as e:
            v = e.embed(self.prompts[0], pooling="last")
            self.assertEqual(len(v), self.m.n_embd)
            self.assertAlmostEqual(sum(x * x for x in v), 1.0, places=4)
            ids = self.m.tokenize(self.prompts[0], add_special=True, parse_special=True)
            self.assertEqual(e.embed(ids, pooling="last"), v)
            self.assertEqual(e.embed(self.prompts[0], pooling="last"), v)  # from the prefix cache
            short = e.embed(self.prompts[0], pooling="last", dimensions=16)
            self.assertEqual(len(short), 16)
            self.assertAlmostEqual(sum(x * x for x in short), 1.0, places=4)
            s = e.rerank("a fruit", "apple pie")
            self.assertTrue(0.0 <= s <= 1.0)

    def test_solo_answers_differ(self):
        self.assertGreater(len(set(self.solo)), 1, "the prompts should not all give one answer")

    def test_concurrent_submit_equals_solo(self):
        with rewind.Engine(self.m, n_ctx=512, max_running=4, cache_bytes=0) as e:
            reqs = [e.submit(p, max_tokens=10, ignore_eos=True) for p in self.prompts]
            self.assertEqual(len({r.id for r in reqs}), len(reqs))
            got = [r.result(timeout=120) for r in reqs]
            st = e.stats()
        self.assertEqual([c.text for c in got], self.solo)
        self.assertTrue(all(c.completion_tokens == 10 for c in got))
        self.assertEqual(st.requests_finished, len(self.prompts))
        self.assertEqual(st.generated_tokens, 10 * len(self.prompts))

    def test_iterate_requests(self):
        with rewind.Engine(self.m, n_ctx=512, max_running=4) as e:
            reqs = [e.submit(p, max_tokens=10, ignore_eos=True) for p in self.prompts[:3]]
            texts = ["".join(r) for r in reqs]
            self.assertEqual([r.result().text for r in reqs], texts)
        self.assertEqual(texts, self.solo[:3])

    def test_threads_share_an_engine(self):
        out = [None] * len(self.prompts)
        with rewind.Engine(self.m, n_ctx=512, max_running=4) as e:

            def work(i):
                out[i] = e.run(self.prompts[i], max_tokens=10, ignore_eos=True).text

            ts = [threading.Thread(target=work, args=(i,)) for i in range(len(self.prompts))]
            for t in ts:
                t.start()
            for t in ts:
                t.join()
        self.assertEqual(out, self.solo)

    def test_prefix_cache_reuses_and_stays_exact(self):
        with rewind.Engine(self.m, n_ctx=512, max_running=2) as e:
            first = e.run(self.prompts[0], max_tokens=10, ignore_eos=True)
            second = e.run(self.prompts[1], max_tokens=10, ignore_eos=True)
            st = e.stats()
        self.assertEqual(first.cached_tokens, 0)
        self.assertGreater(second.cached_tokens, 0)
        self.assertEqual(second.text, self.solo[1])
        self.assertGreater(st.cached_tokens, 0)
        self.assertGreater(st.cache_entries, 0)

    def test_manual_engine(self):
        with rewind.Engine(self.m, n_ctx=512, max_running=4, manual=True) as e:
            reqs = [e.submit(p, max_tokens=10, ignore_eos=True) for p in self.prompts[:3]]
            self.assertEqual([r.result().text for r in reqs], self.solo[:3])
            self.assertEqual(e.step(), 0)
            self.assertEqual(e.run(self.prompts[3], max_tokens=10, ignore_eos=True).text, self.solo[3])
            r = e.submit(self.prompts[4], max_tokens=10, ignore_eos=True)
            self.assertEqual("".join(r), self.solo[4])

    def test_cancel(self):
        with rewind.Engine(self.m, n_ctx=2048, max_running=2) as e:
            long = e.submit(self.prompts[0], max_tokens=1500, ignore_eos=True)
            short = e.submit(self.prompts[1], max_tokens=10, ignore_eos=True)
            long.cancel()
            with self.assertRaises(rewind.CancelledError) as cm:
                long.result(timeout=60)
            self.assertEqual(cm.exception.status, "ERR_CANCELLED")
            self.assertTrue(long.cancelled and long.done())
            self.assertEqual(short.result(timeout=120).text, self.solo[1])
            pending = e.submit(self.prompts[2], max_tokens=1500, ignore_eos=True)
        # closing the engine cancels what still runs
        self.assertTrue(pending.done())
        with self.assertRaises(rewind.CancelledError):
            pending.result()

    def test_submit_errors(self):
        with rewind.Engine(self.m, n_ctx=128, max_running=1, max_queued=0, manual=True) as e:
            with self.assertRaises(rewind.ContextOverflowError):
                e.submit(self.prompts[0], max_tokens=1000)
            e.submit([1, 2, 3], max_tokens=4)
            with self.assertRaises(rewind.BusyError) as cm:
                for _ in range(4):
                    e.submit([1, 2, 3], max_tokens=4)
            self.assertEqual(cm.exception.status, "ERR_BUSY")
        with self.assertRaises(ValueError):
            e.submit([1], max_tokens=1)


@needs_fixtures
class TestSeq(unittest.TestCase):
    """Rewind and state files on the hybrid model: bitwise."""

    @classmethod
    def setUpClass(cls):
        cls.m = rewind.Model(QWEN35)
        cls.ids = cls.m.tokenize(cls.m.render_chat([("user", "Tell me about state files and rewinding.")]),
                                 parse_special=True)
        cls.tmp = tempfile.mkdtemp()

    @classmethod
    def tearDownClass(cls):
        cls.m.close()
        shutil.rmtree(cls.tmp)

    def test_rewind_is_exact(self):
        n = len(self.ids)
        with self.m.seq(n_ctx=256) as s:
            s.eval(self.ids[: n // 2], logits=False)
            want = s.eval(self.ids[n // 2:])
            s.rewind(n // 2)
            self.assertEqual(len(s), n // 2)
            s.eval([7, 8, 9])  # another continuation in between
            s.rewind(n // 2)
            got = s.eval(self.ids[n // 2:])
        self.assertEqual(got.tobytes(), want.tobytes())

    def test_state_file_round_trip(self):
        path = os.path.join(self.tmp, "state.rws")
        with self.m.seq(n_ctx=256) as a, self.m.seq(n_ctx=256) as b:
            a.eval(self.ids[:-1], logits=False)
            a.save(path)
            b.load(path)
            self.assertEqual(len(b), len(a))
            la = a.eval(self.ids[-1:])
            lb = b.eval(self.ids[-1:])
        self.assertEqual(la.tobytes(), lb.tobytes())

    def test_bad_state_files(self):
        path = os.path.join(self.tmp, "bad.rws")
        with self.m.seq(n_ctx=256) as s:
            s.eval(self.ids[:8], logits=False)
            s.save(path)
            with open(path, "r+b") as f:
                f.seek(os.path.getsize(path) // 2)
                byte = f.read(1)
                f.seek(-1, os.SEEK_CUR)
                f.write(bytes([byte[0] ^ 0x40]))
            with self.assertRaises(rewind.FormatError):
                s.load(path)
            with self.assertRaises(rewind.IOFailureError):
                s.load(os.path.join(self.tmp, "missing.rws"))
            # a file of another KV type is refused, not misread
            s.save(path)
            with self.m.seq(n_ctx=256, kv_f32=True) as other:
                with self.assertRaises(rewind.RewindError):
                    other.load(path)

    def test_threads_take_turns(self):
        # sequences of one model in two threads: their passes take turns and
        # each gets what it gets alone
        with self.m.seq(n_ctx=256) as s:
            alone = s.eval(self.ids).tobytes()
        out = {}

        def work(k):
            with self.m.seq(n_ctx=256) as s:
                for i in range(0, len(self.ids), 5):  # in chunks: the same bits
                    logits = s.eval(self.ids[i:i + 5])
                out[k] = logits.tobytes()

        ts = [threading.Thread(target=work, args=(k,)) for k in range(2)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        self.assertEqual(out, {0: alone, 1: alone})


if __name__ == "__main__":
    unittest.main()
