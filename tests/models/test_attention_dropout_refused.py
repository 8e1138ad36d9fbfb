"""GAT's, R-GAT's and typed GAT's attention dropout draws torch's masks per edge, which the
strategies keying every mask by vertex (split, fullgraph, offload) cannot reproduce on a
replica: refused at launch in one line (it stopped the first step before), and trained at
model.attn_dropout=0 (and under data)."""

import pytest

from gnnscale.errors import ConfigError
from gnnscale.runner.validate import check_config
from tests._train import make_cfg

BASE = ("dataset=synthetic", "dataset.preset=tiny", "model.num_layers=2", "sampler.fanouts=[5,5]",
        "model=gat", "model.hidden=32")


@pytest.mark.parametrize("strategy", ["split", "fullgraph", "offload"])
def test_attention_dropout_is_refused_where_masks_are_keyed(tmp_path, strategy):
    cfg = make_cfg(tmp_path, *BASE, "model.attn_dropout=0.5", f"strategy={strategy}")
    with pytest.raises(ConfigError, match=r"model\.attn_dropout=0\.5 drops attention .*set "
                       r"model\.attn_dropout=0\).*use strategy=data") as err:
        check_config(cfg)
    assert "\n" not in str(err.value)
    check_config(make_cfg(tmp_path, *BASE, "model.attn_dropout=0", "model.dropout=0.5",
                          f"strategy={strategy}"))


def test_attention_dropout_trains_under_data(tmp_path):
    check_config(make_cfg(tmp_path, *BASE, "model.attn_dropout=0.5", "strategy=data"))


def test_typed_attention_models_say_it_too():
    from gnnscale.models.schemas import HGATConfig, RGATConfig

    assert "model.attn_dropout=0.2" in RGATConfig(attn_dropout=0.2).why_not_layer_by_layer()
    assert HGATConfig(attn_dropout=0.2).why_not_layer_by_layer() is not None
    assert RGATConfig().why_not_layer_by_layer() is None
