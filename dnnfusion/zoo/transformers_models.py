"""Transformer models built from Hugging Face ``transformers`` config objects
(random weights, no hub access), wrapped so ``forward`` returns plain tensors.

All use ``attn_implementation="eager"`` so the exported attention is plain
MatMul/Softmax ops, and ``use_cache=False`` / ``return_dict=True`` internally.
Configs reproduce the published checkpoints' hyper-parameters:

=============  =============================================================
tinybert       TinyBERT-4L-312 (Jiao et al. 2020): BERT, 4 layers, hidden 312,
               12 heads, FFN 1200 -- 14.4 M params
distilbert     distilbert-base-uncased (Sanh et al. 2019): 6 layers, 768, 12
               heads, FFN 3072 -- 66.4 M
albert         albert-base-v2 (Lan et al. 2020): 12 shared layers, 768, 12
               heads, FFN 3072, embedding 128, vocab 30000 -- 11.7 M
bert_base      bert-base-uncased (Devlin et al. 2019): 12 layers, 768, 12
               heads -- 109.5 M
mobilebert     mobilebert-uncased (Sun et al. 2020): 24 layers, hidden 512,
               bottleneck 128, 4 stacked FFNs, NoNorm, ReLU -- 24.6 M
gpt2           gpt2 "small" (Radford et al. 2019): 12 layers, 768, 12 heads --
               124.4 M
vit_b16        ViT-B/16 (Dosovitskiy et al. 2021): 224x224, patch 16, 12
               layers, 768, 12 heads, with pooler -- 86.4 M
=============  =============================================================
"""
from __future__ import annotations

import torch
from torch import nn

__all__ = ["EncoderWrapper", "ViTWrapper", "build_text_model", "build_vit", "TEXT_MODELS"]


class EncoderWrapper(nn.Module):
    """``(input_ids, attention_mask) -> (last_hidden_state[, pooler_output])``."""

    def __init__(self, model: nn.Module, has_pooler: bool):
        super().__init__()
        self.model = model
        self.has_pooler = has_pooler

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor):
        out = self.model(input_ids=input_ids, attention_mask=attention_mask, return_dict=True)
        if self.has_pooler:
            return out.last_hidden_state, out.pooler_output
        return (out.last_hidden_state,)


class ViTWrapper(nn.Module):
    """``pixel_values -> (last_hidden_state, pooler_output)``."""

    def __init__(self, model: nn.Module):
        super().__init__()
        self.model = model

    def forward(self, pixel_values: torch.Tensor):
        out = self.model(pixel_values=pixel_values, return_dict=True)
        return out.last_hidden_state, out.pooler_output


# name -> (config class, model class, full-size kwargs, has pooler)
TEXT_MODELS = {
    "tinybert": ("BertConfig", "BertModel", dict(
        vocab_size=30522, hidden_size=312, num_hidden_layers=4, num_attention_heads=12,
        intermediate_size=1200, max_position_embeddings=512), True),
    "distilbert": ("DistilBertConfig", "DistilBertModel", dict(
        vocab_size=30522, dim=768, n_layers=6, n_heads=12, hidden_dim=3072), False),
    "albert": ("AlbertConfig", "AlbertModel", dict(
        vocab_size=30000, embedding_size=128, hidden_size=768, num_hidden_layers=12,
        num_attention_heads=12, intermediate_size=3072, hidden_act="gelu_new"), True),
    "bert_base": ("BertConfig", "BertModel", dict(
        vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
        intermediate_size=3072), True),
    "mobilebert": ("MobileBertConfig", "MobileBertModel", dict(
        vocab_size=30522, hidden_size=512, num_hidden_layers=24, num_attention_heads=4,
        intermediate_size=512, embedding_size=128, intra_bottleneck_size=128,
        true_hidden_size=128, num_feedforward_networks=4, normalization_type="no_norm",
        hidden_act="relu", use_bottleneck=True, key_query_shared_bottleneck=True,
        use_bottleneck_attention=False), True),
    "gpt2": ("GPT2Config", "GPT2Model", dict(
        vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12), False),
}

# Reduced variants: 2 layers, small hidden, small vocab (fast tests).
_REDUCED = {
    "tinybert": dict(vocab_size=1000, hidden_size=48, num_hidden_layers=2,
                     num_attention_heads=4, intermediate_size=96, max_position_embeddings=64),
    "distilbert": dict(vocab_size=1000, dim=64, n_layers=2, n_heads=4, hidden_dim=128,
                       max_position_embeddings=64),
    "albert": dict(vocab_size=1000, embedding_size=32, hidden_size=64, num_hidden_layers=2,
                   num_attention_heads=4, intermediate_size=128, max_position_embeddings=64),
    "bert_base": dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                      num_attention_heads=4, intermediate_size=128, max_position_embeddings=64),
    "mobilebert": dict(vocab_size=1000, hidden_size=64, num_hidden_layers=2,
                       num_attention_heads=4, intermediate_size=64, embedding_size=32,
                       intra_bottleneck_size=32, true_hidden_size=32,
                       max_position_embeddings=64),
    "gpt2": dict(vocab_size=1000, n_positions=64, n_embd=64, n_layer=2, n_head=4,
                 bos_token_id=0, eos_token_id=0),
}


def build_text_model(name: str, reduced: bool = False) -> nn.Module:
    import transformers

    cfg_cls, model_cls, kwargs, pooler = TEXT_MODELS[name]
    kwargs = dict(kwargs)
    if reduced:
        kwargs.update(_REDUCED[name])
    cfg = getattr(transformers, cfg_cls)(**kwargs)
    cfg._attn_implementation = "eager"
    cfg.use_cache = False
    if name == "gpt2":
        model = getattr(transformers, model_cls)(cfg)
    elif pooler:
        model = getattr(transformers, model_cls)(cfg, add_pooling_layer=True)
    else:
        model = getattr(transformers, model_cls)(cfg)
    return EncoderWrapper(model.eval(), pooler).eval()


def build_vit(reduced: bool = False) -> nn.Module:
    from transformers import ViTConfig, ViTModel

    kw = dict(image_size=224, patch_size=16, hidden_size=768, num_hidden_layers=12,
              num_attention_heads=12, intermediate_size=3072)
    if reduced:
        kw.update(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2,
                  num_attention_heads=4, intermediate_size=128)
    cfg = ViTConfig(**kw)
    cfg._attn_implementation = "eager"
    return ViTWrapper(ViTModel(cfg, add_pooling_layer=True).eval()).eval()
