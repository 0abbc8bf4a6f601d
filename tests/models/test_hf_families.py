"""The family records (issue 23): a new family is one record, and no function compares a
family's name. Each record states its coverage of config.json (mapped, ignored with the value
normlab assumes, or bookkeeping), held against transformers' own config classes: a field a new
transformers adds is a failure here, never a silent load."""

from __future__ import annotations

import ast
import dataclasses
import json
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("safetensors")

from normlab.models import GPT, GPTConfig, load_hf, save_hf
from normlab.models.hf import families

CFG = GPTConfig(vocab_size=11, seq_len=8, n_layers=2, d_model=8, n_heads=2, n_kv_heads=1,
                norm="rmsnorm", positions="rope", activation="swiglu", bias=False)


def test_a_renamed_llama_is_one_record(tmp_path, monkeypatch):
    toy = dataclasses.replace(families.RECORDS["llama"], name="toyllama",
                              architecture="ToyLlamaForCausalLM")
    monkeypatch.setitem(families.RECORDS, "toyllama", toy)
    model = GPT(CFG, rng=np.random.default_rng(0))
    path = save_hf(model, tmp_path / "toy", family="toyllama")
    hf = json.loads((path / "config.json").read_text())
    assert hf["model_type"] == "toyllama" and hf["architectures"] == ["ToyLlamaForCausalLM"]
    llama = save_hf(model, tmp_path / "llama")
    from safetensors.numpy import load_file

    ours, theirs = load_file(path / "model.safetensors"), load_file(llama / "model.safetensors")
    assert sorted(ours) == sorted(theirs)  # the same tensor names and layout
    loaded = load_hf(path)
    assert loaded.config == load_hf(llama).config  # read as llama reads it
    for name, p in model.parameters().items():
        np.testing.assert_array_equal(loaded.parameters()[name], p)
    idx = np.random.default_rng(1).integers(0, 11, (2, 8))
    np.testing.assert_array_equal(loaded.logits(idx), model.logits(idx))


def test_the_records_cover_the_families_in_family_of_order():
    assert set(families.RECORDS) == set(families.FAMILIES)
    assert list(families.RECORDS)[-1] == "llama"  # claims whatever the others leave
    assert families.ARCHITECTURES["qwen3"] == "Qwen3ForCausalLM"


def test_no_function_compares_a_family_name():
    names = set(families.FAMILIES)
    src = Path(families.__file__).parent
    found = []
    for path in sorted(src.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Compare):
                for side in (node.left, *node.comparators):
                    if isinstance(side, ast.Constant) and side.value in names:
                        found.append(f"{path.name}:{node.lineno}")
    assert not found, found


# ---- coverage of config.json -----------------------------------------------------------------
def _uncovered(rec: families.Family, hf: dict) -> list[str]:
    return sorted(set(hf) - set(rec.mapped) - set(rec.ignored) - families.BOOKKEEPING)


@pytest.mark.parametrize("name", families.FAMILIES)
def test_every_field_of_transformers_default_config_is_covered(name):
    """Every field of the transformers config class's default ``to_dict()`` (the registry's
    class for the model_type, not the record's) is mapped, ignored with an assumption that its
    default satisfies, or bookkeeping; the default config then reads."""
    transformers = pytest.importorskip("transformers")
    rec = families.RECORDS[name]
    hf = transformers.CONFIG_MAPPING[name]().to_dict()
    assert not _uncovered(rec, hf), (f"{name}: fields of transformers "
                                     f"{transformers.__version__} that no record covers")
    for key, assumed in rec.ignored.items():
        if key in hf:
            assert assumed.accepts(hf[key]), (name, key, hf[key])
    families.config_from_hf(hf)
    # the check can fail: a field transformers adds shows up, and is refused by name
    new = {**hf, "a_new_transformers_field": 0.0}
    assert _uncovered(rec, new) == ["a_new_transformers_field"]
    with pytest.raises(ValueError, match=f"{name}: a_new_transformers_field not supported"):
        families.config_from_hf(new)


def test_the_three_lists_are_disjoint():
    for rec in families.RECORDS.values():
        assert not set(rec.mapped) & set(rec.ignored), rec.name
        assert not (set(rec.mapped) | set(rec.ignored)) & families.BOOKKEEPING, rec.name


class _Reads(dict):
    """A config.json that records the keys read."""

    def __init__(self, *args, **kw):
        super().__init__(*args, **kw)
        self.read: set[str] = set()

    def get(self, key, default=None):
        self.read.add(key)
        return super().get(key, default)

    def __getitem__(self, key):
        self.read.add(key)
        return super().__getitem__(key)


def _variants(name: str, hf: dict) -> list[dict]:
    """The default config and its transformers 4 form (rope_theta and rope_scaling beside no
    rope_parameters, no layer_types, Qwen's window switched on): the reader's other paths."""
    if name == "gpt2":
        return [hf]
    old = {k: v for k, v in hf.items() if k not in ("rope_parameters", "layer_types")}
    old.update(rope_theta=500.0, rope_scaling={"type": "linear", "factor": 2.0})
    if "use_sliding_window" in hf:
        old.update(use_sliding_window=True, sliding_window=64, max_window_layers=2)
    return [hf, old]


@pytest.mark.parametrize("name", families.FAMILIES)
def test_a_record_reads_every_field_it_maps_and_nothing_else(name):
    transformers = pytest.importorskip("transformers")
    rec = families.RECORDS[name]
    read: set[str] = set()
    for hf in _variants(name, transformers.CONFIG_MAPPING[name]().to_dict()):
        if name == "gpt2":
            hf = {**hf, "n_inner": 64}
        recording = _Reads(hf)
        rec.read(recording, "float32", rec)
        read |= recording.read
    assert set(rec.mapped) <= read, sorted(set(rec.mapped) - read)
    assert read <= set(rec.mapped) | set(rec.ignored), sorted(read - set(rec.mapped))


def _tiny_hf(name: str) -> dict:
    """A small valid config.json of family ``name`` (normlab's writer)."""
    cfg = {"gpt2": GPTConfig(vocab_size=11, seq_len=8, n_layers=2, d_model=8, n_heads=2,
                             bias=True),
           "llama": CFG, "mistral": dataclasses.replace(CFG, sliding_window=3),
           "qwen2": dataclasses.replace(CFG, qkv_bias=True),
           "qwen3": dataclasses.replace(CFG, qk_norm="rmsnorm"),
           "gemma2": dataclasses.replace(CFG, placement="sandwich", norm_offset=1.0,
                                         activation="geglu", embed_scale=8 ** 0.5),
           "olmo2": dataclasses.replace(CFG, placement="branch", qk_norm="rmsnorm",
                                        qk_norm_scope="all")}[name]
    return families.hf_config(cfg, name)


IGNORED = [(name, key) for name in families.FAMILIES
           for key in sorted(families.RECORDS[name].ignored)]


@pytest.mark.parametrize("name,key", IGNORED, ids=[f"{n}.{k}" for n, k in IGNORED])
def test_an_ignored_field_is_read_past_or_refused_by_its_assumption(name, key):
    """An ignored field at a value normlab assumes changes nothing; at any other value it is
    refused, naming the field, its value and the assumption."""
    rec = families.RECORDS[name]
    hf = _tiny_hf(name)
    want = families.config_from_hf(hf)
    assumed = rec.ignored[key]
    for value in (True, False, 0, 1, 0.5, "x", None, {}, [1]):
        edited = {**hf, key: value}
        if assumed.accepts(value):
            assert families.config_from_hf(edited) == want, (key, value)
            continue
        message = (f"{name}: {key} = {value!r} is not supported (normlab assumes {key} = "
                   f"{assumed.shown()}: ")
        with pytest.raises(ValueError) as info:
            families.config_from_hf(edited)
        assert str(info.value).startswith(message), str(info.value)


@pytest.mark.parametrize("value", [True, False, 0, None, {}, [], "x"])
def test_a_field_neither_mapped_nor_listed_is_refused_whatever_its_value(value):
    for name in families.FAMILIES:
        hf = {**_tiny_hf(name), "normalize_before": value}
        with pytest.raises(ValueError, match=f"{name}: normalize_before not supported"):
            families.config_from_hf(hf)
    # a field one family maps is unknown to another: Llama's mlp_bias in a Mistral config
    with pytest.raises(ValueError, match="mistral: mlp_bias not supported"):
        families.config_from_hf({**_tiny_hf("mistral"), "mlp_bias": False})


def test_a_field_one_family_maps_is_typed_where_another_reads_past_it():
    """Mistral's sliding_window is mapped and typed; Llama's transformers code reads none, so
    its record reads past it whatever it holds (the logits do not depend on it)."""
    with pytest.raises(ValueError, match="mistral: sliding_window = '3' must be an integer"):
        families.config_from_hf({**_tiny_hf("mistral"), "sliding_window": "3"})
    llama = _tiny_hf("llama")
    assert families.config_from_hf({**llama, "sliding_window": "3"}) == \
        families.config_from_hf(llama)


@pytest.mark.parametrize("rope,message", [
    ({"rope_type": "default", "rope_theta": 1e4, "mrope_section": [1, 1]},
     r"llama: rope_parameters: mrope_section not supported \(a default RoPE setting holds"),
    ({"rope_type": "linear", "rope_theta": 1e4, "factor": 2.0, "low_freq_factor": 1.0},
     "rope_parameters: low_freq_factor not supported"),
])
def test_a_rope_setting_holds_only_the_keys_of_its_type(rope, message):
    with pytest.raises(ValueError, match=message):
        families.config_from_hf({**_tiny_hf("llama"), "rope_parameters": rope})


def test_a_loaded_model_is_saved_back_as_its_family(tmp_path):
    """A Mistral checkpoint without a window reads as a config Llama also expresses: the model
    remembers it came from a mistral checkpoint, and save_hf writes it back as mistral."""
    model = GPT(CFG, rng=np.random.default_rng(0))
    path = save_hf(model, tmp_path / "m", family="mistral")
    loaded = load_hf(path)
    assert families.family_of(loaded.config) == "llama"
    again = save_hf(loaded, tmp_path / "again")
    assert json.loads((again / "config.json").read_text())["model_type"] == "mistral"
    assert loaded.hf_family == "mistral" and load_hf(again).hf_family == "mistral"
    other = save_hf(loaded, tmp_path / "llama", family="llama")  # an explicit family wins
    assert json.loads((other / "config.json").read_text())["model_type"] == "llama"
    assert GPT(CFG, rng=np.random.default_rng(0)).hf_family is None  # built, not loaded
