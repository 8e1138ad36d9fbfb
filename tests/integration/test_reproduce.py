"""Suite ``reproduce``: its volume pieces on tiny paper-like graphs give sane keys and values."""

from __future__ import annotations

import pytest
import torch

from benchmarks import reproduce as rp
from gnnscale.data.synthetic import generate


@pytest.fixture(scope="module")
def papers():
    return generate("papers_like", scale=0.05, seed=0)


def test_footprint_similarity_bounds():
    a = torch.tensor([5.0, 4, 3, 2, 1, 0, 0, 0, 0, 0])
    assert rp.footprint_similarity(a, a, top=0.3) == pytest.approx(1.0)
    b = torch.tensor([0.0, 0, 0, 0, 0, 1, 2, 3, 4, 5])
    assert rp.footprint_similarity(a, b, top=0.3) == 0.0
    c = torch.tensor([5.0, 2, 3, 0, 0, 0, 0, 0, 0, 9])  # top 3: 9, 5, 3 -> shares 0 and 2
    assert rp.footprint_similarity(a, c, top=0.3) == pytest.approx((5 + 3) / (9 + 5 + 3))


def test_hongtu_alpha_grows_and_dedup_saves(papers):
    alpha = rp.hongtu_alpha(papers, [2, 4, 8, 16], seed=0)
    vals = [alpha[str(p)] for p in (2, 4, 8, 16)]
    # METIS 2- and 4-way cuts differ in quality: only the chunked range grows for sure
    assert all(v >= 1.0 for v in vals) and vals[1:] == sorted(vals[1:]) and vals[3] > vals[0]
    assert 0.0 < rp.doubling_saving(alpha) < 0.5
    d = rp.hongtu_dedup(papers, 16, seed=0)
    assert d["rows"]["none"] >= d["rows"]["inter"] >= d["rows"]["inter+intra"] > 0
    assert d["alpha"] == pytest.approx(alpha["16"])
    assert d["inter_saving_over_V"] >= 0 and d["intra_saving_over_V"] >= 0
    rows = rp.hongtu_rows({"papers_like": {"alpha": alpha, "dedup": d}})
    assert {r["source"] for r in rows} == {"Table 3", "section 4.3", "Table 8"}


def test_deepgalois_replication_factors(papers):
    res = rp.deepgalois(papers, [4])
    assert set(res) == {"oec", "iec", "cvc", "hvc"}
    for name, by_parts in res.items():
        assert 1.0 <= by_parts["4"]["replication_factor"] <= 4.0, name
    rows = rp.deepgalois_rows(res)
    assert any(r["figure"].startswith("cvc over oec") for r in rows)


def test_gsplit_and_fgnn_volumes(papers):
    g = generate("products_like", scale=0.05, seed=0)
    r = rp.gsplit(g, "products_like", rp.metis_part(g, rp.GPUS, 0).int(), 2, seed=0)
    assert r["edges_data"] >= r["edges_split"] > 0 and r["redundancy_pct"] >= 0
    assert 0.0 <= r["local_edge_ratio"] <= 1.0 and r["edge_skew"] >= 1.0
    sim = rp.fgnn_similarity(papers, "papers_like", seed=0)
    assert 0.0 < sim["similarity_pct"] <= 100.0
    presets = {"papers_like": {f"{p}_hit_rate": {"0.05": 0.5, "0.1": 0.6}
                               for p in ("presample", "oracle", "degree", "random")}}
    rows = rp.gsplit_rows({"products_like": r}) + rp.fgnn_rows({"papers_like": sim}, presets)
    text = rp.markdown(rows)
    assert text.count("\n") == len(rows) + 2 and "Table 5" in text and "Fig. 11(b)" in text


def test_write_doc_replaces_only_the_table(tmp_path):
    doc = tmp_path / "r.md"
    doc.write_text(f"intro\n{rp.START}\nold\n{rp.END}\noutro\n")
    row = rp._row("P", "T1", "f", "papers_like", 2.0, 1.0, "n", compare=1.0)
    rp.write_doc([row], doc)
    text = doc.read_text()
    assert text.startswith("intro\n") and text.endswith("outro\n") and "old" not in text
    assert "| 2 | 1 | 2 |" in text
    (tmp_path / "bad.md").write_text("no markers")
    with pytest.raises(SystemExit, match="markers"):
        rp.write_doc([row], tmp_path / "bad.md")
