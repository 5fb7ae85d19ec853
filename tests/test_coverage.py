"""`python -m eagle_core.bench.coverage`: the share of vanilla's tokens outside a head's draft
vocabulary, read from a journal and from EAGLE-2 and EAGLE-3 head directories, against a count by hand."""
import json

import torch

from conftest import tiny_target
from eagle_core.bench.coverage import draft_vocab_of, main, outside_shares, vanilla_tokens
from eagle_core.bench.journal import Sample, sample_to_dict
from eagle_core.drafting.head import write_draft_vocab
from eagle_core.drafting.head3 import Eagle3Config, Eagle3Head, save_head3


def _journal(path):
    samples = [Sample("vanilla", 0, 0, "math", (1, 2, 3, 9), 1.0, 4, 1.0),
               Sample("eagle", 0, 0, "math", (20, 21), 1.0, 1, 2.0),  # not vanilla: ignored
               Sample("vanilla", 1, 0, "writing", (4, 5), 1.0, 2, 1.0),
               Sample("vanilla", 1, 1, "writing", (22, 23), 1.0, 2, 1.0)]  # a second repeat: ignored
    lines = [{"journal": {}}, {"prompt": "a", "repeat": 0, "samples": [sample_to_dict(s) for s in samples[:2]]},
             {"prompt": "b", "repeat": 0, "samples": [sample_to_dict(samples[2])]},
             {"prompt": "b", "repeat": 1, "samples": [sample_to_dict(samples[3])]}]
    path.write_text("\n".join(json.dumps(x) for x in lines) + "\n{\"prompt\": \"torn")


def test_shares_by_hand(tmp_path, capsys):
    j = tmp_path / "j.jsonl"
    _journal(j)
    tokens = vanilla_tokens(str(j))
    assert tokens == {"math": [1, 2, 3, 9], "writing": [4, 5]}
    head2 = tmp_path / "h2"
    head2.mkdir()
    (head2 / "config.json").write_text(json.dumps({"vocab_size": 24}))
    write_draft_vocab(str(head2), [1, 2, 4, 7])
    assert draft_vocab_of(str(head2)) == {1, 2, 4, 7}
    shares = outside_shares(tokens, draft_vocab_of(str(head2)))
    assert shares == {"math": 0.5, "writing": 0.5, "all": 3 / 6}
    # an EAGLE-3 head: the vocabulary is its d2t's
    target = tiny_target()
    head3 = Eagle3Head(Eagle3Config.for_target(target.config, draft_vocab_size=5))
    head3.set_draft_vocab([1, 2, 3, 5, 9])
    save_head3(head3, str(tmp_path / "h3"))
    assert draft_vocab_of(str(tmp_path / "h3")) == {1, 2, 3, 5, 9}
    assert outside_shares(tokens, {1, 2, 3, 5, 9}) == {"math": 0.0, "writing": 0.5, "all": 1 / 6}
    main([str(j), "--heads", str(head2), str(tmp_path / "h3")])
    out = capsys.readouterr().out
    assert "| math | 4 | 50.0% | 0.0% |" in out and "| all | 6 | 50.0% | 16.7% |" in out
