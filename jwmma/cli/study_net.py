"""``jwmma study-net``: a digits MLP trained in float32, evaluated with every linear layer
through the emulated units, and fine-tuned 2:4 sparse (`jwmma.study.network`)."""
from __future__ import annotations

from ..study import network
from .common import CliError

__all__ = ["cmd_study_net", "add"]


def _names(text: str, valid, what: str) -> tuple:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in valid]
    if bad or not names:
        raise CliError(f"--{what} takes a comma-separated list of {', '.join(valid)}; got {text!r}")
    return names


def cmd_study_net(args) -> int:
    """Run ``jwmma study-net`` (argparse ``args``); prints progress and the results table.
    Returns the exit code (0; bad lists raise CliError)."""
    formats = _names(args.formats, tuple(network.FORMAT_BUILTINS), "formats")
    cdna4 = _names(args.cdna4_models, network.CDNA4_MODELS, "cdna4-models") if args.cdna4_models else ()
    rdna4 = _names(args.rdna4_models, network.RDNA4_MODELS, "rdna4-models") if args.rdna4_models else ()
    for flag, v, lo in (("--hidden", args.hidden, 1), ("--upsample", args.upsample, 8), ("--epochs", args.epochs, 1),
                        ("--finetune-epochs", args.finetune_epochs, 0)):
        if v < lo:
            raise CliError(f"{flag} must be at least {lo}, got {v}")
    cfgs = network.configs(formats, cdna4, rdna4)
    if not cfgs:
        raise CliError("no configuration left: give --cdna4-models or --rdna4-models")
    try:
        result = network.run(hidden=args.hidden, upsample=args.upsample, epochs=args.epochs,
                             finetune_epochs=args.finetune_epochs, seed=args.seed, cfgs=cfgs, out=args.out)
    except ImportError as e:
        raise CliError(str(e)) from None
    print()
    print(network.format_rows(result))
    if args.out:
        print(f"\nwrote {args.out}/results.json and figures")
    return 0


def add(sub):
    """Register ``jwmma study-net`` on an argparse subparsers object."""
    p = sub.add_parser("study-net", help="a trained digits MLP with every layer through the emulated units",
                       description="Train an MLP on scikit-learn's handwritten digits in float32, evaluate it with "
                       "every linear layer through jwmma.matmul for each (builtin, model) pair (accuracy; per "
                       "layer the error split into quantisation + pruning and accumulator), then fine-tune it "
                       "2:4 sparse through the emulated forward pass. Needs scikit-learn (extra 'network').")
    p.add_argument("--out", metavar="DIR", help="write results.json and PNG figures here")
    p.add_argument("--hidden", type=int, default=2048, help="width of the two hidden layers (2048)")
    p.add_argument("--upsample", type=int, default=32, help="images upsampled from 8x8 to this size (32: K = 1024)")
    p.add_argument("--epochs", type=int, default=20, help="float32 training epochs (20)")
    p.add_argument("--finetune-epochs", type=int, default=6, help="2:4 fine-tuning epochs, emulated forward (6)")
    p.add_argument("--formats", default="fp8,bf8,f16,bf16", help="input formats (fp8,bf8,f16,bf16)")
    p.add_argument("--cdna4-models", default=",".join(network.CDNA4_MODELS),
                   help=f"models on the CDNA4 builtin ({','.join(network.CDNA4_MODELS)}; '' for none)")
    p.add_argument("--rdna4-models", default=",".join(network.RDNA4_MODELS),
                   help=f"models on the RDNA4 builtin ({','.join(network.RDNA4_MODELS)}; '' for none)")
    p.add_argument("--seed", type=int, default=0, help="seed of the split, initialisation and batches (0)")
    p.set_defaults(func=cmd_study_net)
