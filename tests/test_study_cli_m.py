"""`-m` is M in ``jwmma gemm`` but was --model in ``jwmma study`` (issue #10 item 13): study now
refuses -m with a message naming what to use, and writes nothing."""
from __future__ import annotations

import re

from jwmma.cli import build_parser, main


def test_study_refuses_m_and_names_the_options(capsys, tmp_path):
    out = tmp_path / "s"
    rc = main(["study", "-m", "exact", "--k", "64", "-o", str(out)])
    _, err = capsys.readouterr()
    assert rc == 2
    assert "no -m (got -m exact)" in err and "--model" in err and "--size" in err
    assert not out.exists()  # nothing ran


def test_m_is_m_in_gemm_and_model_is_model_in_study():
    p = build_parser()
    g = p.parse_args(["gemm", "-m", "48"])
    assert g.m == 48 and g.model is None
    s = p.parse_args(["study", "--model", "exact,cdna3"])
    assert s.model == ["exact,cdna3"] and s.m_given is None
    study_help = p._subparsers._group_actions[0].choices["study"].format_help()
    assert not re.search(r"(^|[\s\[,])-m[\s\],]", study_help)  # not offered (--merge-only is fine)
