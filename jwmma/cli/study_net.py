"""``jwmma study-net``: a trained network with its contractions through the emulated units.
``--net digits`` (default): a digits MLP trained in float32, evaluated with every linear layer
through the units and fine-tuned 2:4 sparse (`jwmma.study.network`); ``--net transformer``: a
byte-level transformer on a generated language, every contraction through each unit, the
accumulator's share as the context grows, and a training run through the units
(`jwmma.study.transformer`)."""
from __future__ import annotations

from ..study import network, transformer
from .common import CliError

__all__ = ["cmd_study_net", "add", "NETS", "DIGITS_FULL", "DIGITS_SMALL"]

#: the networks of ``--net``
NETS = ("digits", "transformer")
#: the digits study's sizes, full and ``--small`` (hidden, upsample, epochs, finetune_epochs)
DIGITS_FULL = dict(hidden=2048, upsample=32, epochs=20, finetune_epochs=6)
DIGITS_SMALL = dict(hidden=128, upsample=12, epochs=10, finetune_epochs=2)


def _names(text: str, valid, what: str) -> tuple:
    names = tuple(t.strip() for t in text.split(",") if t.strip())
    bad = [n for n in names if n not in valid]
    if bad or not names:
        raise CliError(f"--{what} takes a comma-separated list of {', '.join(valid)}; got {text!r}")
    return names


def _ints(text: str, what: str) -> tuple:
    try:
        values = tuple(int(t) for t in text.split(",") if t.strip())
    except ValueError:
        values = ()
    if not values or min(values) < 1:
        raise CliError(f"--{what} takes a comma-separated list of positive integers, got {text!r}")
    return values


def cmd_study_net(args) -> int:
    """Run ``jwmma study-net`` (argparse ``args``); prints progress and the results table.
    Returns the exit code (0; bad lists raise CliError)."""
    if args.net == "transformer":
        return _transformer(args)
    given = {k: getattr(args, k) for k in DIGITS_FULL}
    size = {k: v if v is not None else (DIGITS_SMALL if args.small else DIGITS_FULL)[k] for k, v in given.items()}
    formats = _names(args.formats, tuple(network.FORMAT_BUILTINS), "formats")
    cdna4 = _names(args.cdna4_models, network.CDNA4_MODELS, "cdna4-models") if args.cdna4_models else ()
    rdna4 = _names(args.rdna4_models, network.RDNA4_MODELS, "rdna4-models") if args.rdna4_models else ()
    for flag, k, lo in (("--hidden", "hidden", 1), ("--upsample", "upsample", 8), ("--epochs", "epochs", 1),
                        ("--finetune-epochs", "finetune_epochs", 0)):
        if size[k] < lo:
            raise CliError(f"{flag} must be at least {lo}, got {size[k]}")
    cfgs = network.configs(formats, cdna4, rdna4)
    if not cfgs:
        raise CliError("no configuration left: give --cdna4-models or --rdna4-models")
    try:
        result = network.run(**size, seed=args.seed, cfgs=cfgs, out=args.out)
    except ImportError as e:
        raise CliError(str(e)) from None
    print()
    print(network.format_rows(result))
    if args.out:
        print(f"\nwrote {args.out}/results.json and figures")
    return 0


def _transformer(args) -> int:
    units = _names(args.units, transformer.UNIT_KEYS, "units") if args.units else transformer.UNIT_KEYS
    contexts = _ints(args.contexts, "contexts") if args.contexts else None
    for flag, v, lo in (("--eval-docs", args.eval_docs, 1), ("--eval-context", args.eval_context, 2),
                        ("--train-steps", args.train_steps, 0)):
        if v is not None and v < lo:
            raise CliError(f"{flag} must be at least {lo}, got {v}")
    try:
        result = transformer.run(small=args.small, units=units, eval_docs=args.eval_docs,
                                 eval_context=args.eval_context, contexts=contexts, train_steps=args.train_steps,
                                 retrain=args.retrain, out=args.out)
    except ImportError as e:
        raise CliError(f"{e} (the transformer study needs Flax: pip install 'jwmma[nn]')") from None
    except ValueError as e:
        raise CliError(str(e)) from None
    print()
    print(transformer.format_rows(result))
    if args.out:
        print(f"\nwrote {args.out}/results.json, CSV files and figures")
    return 0


def add(sub):
    """Register ``jwmma study-net`` on an argparse subparsers object."""
    p = sub.add_parser("study-net", help="a trained network (digits MLP or transformer) through the emulated units",
                       description="--net digits (default): train an MLP on scikit-learn's handwritten digits in "
                       "float32, evaluate it with every linear layer through jwmma.matmul for each (builtin, "
                       "model) pair (accuracy; per layer the error split into quantisation + pruning and "
                       "accumulator), then fine-tune it 2:4 sparse through the emulated forward pass (needs "
                       "scikit-learn, extra 'network'). --net transformer: a byte-level transformer trained on a "
                       "generated language (shipped weights), every contraction through each unit (perplexity, "
                       "top-1 agreement and KL against float32; per contraction quantisation vs accumulator; the "
                       "accumulator's share of the p @ v error as the context grows) and a training run with the "
                       "forward and backward GEMMs through the units (needs Flax, extra 'nn').")
    p.add_argument("--net", choices=NETS, default="digits", help="the network (digits)")
    p.add_argument("--out", metavar="DIR", help="write results.json, CSV files and PNG figures here")
    p.add_argument("--small", action="store_true", help="a quick run at small sizes (digits: hidden 128, 12x12 "
                   "images, 10 epochs, 2 fine-tuning epochs; transformer: 2 documents x 64 bytes, contexts "
                   "16,32,64, 3 training steps)")
    d = p.add_argument_group("--net digits")
    d.add_argument("--hidden", type=int, default=None, help="width of the two hidden layers (2048)")
    d.add_argument("--upsample", type=int, default=None, help="images upsampled from 8x8 to this size (32: K = 1024)")
    d.add_argument("--epochs", type=int, default=None, help="float32 training epochs (20)")
    d.add_argument("--finetune-epochs", type=int, default=None, help="2:4 fine-tuning epochs, emulated forward (6)")
    d.add_argument("--formats", default="fp8,bf8,f16,bf16", help="input formats (fp8,bf8,f16,bf16)")
    d.add_argument("--cdna4-models", default=",".join(network.CDNA4_MODELS),
                   help=f"models on the CDNA4 builtin ({','.join(network.CDNA4_MODELS)}; '' for none)")
    d.add_argument("--rdna4-models", default=",".join(network.RDNA4_MODELS),
                   help=f"models on the RDNA4 builtin ({','.join(network.RDNA4_MODELS)}; '' for none)")
    d.add_argument("--seed", type=int, default=0, help="seed of the split, initialisation and batches (0)")
    t = p.add_argument_group("--net transformer")
    t.add_argument("--units", default=None, help=f"the units, comma-separated (all: {','.join(transformer.UNIT_KEYS)})")
    t.add_argument("--eval-docs", type=int, default=None, help=f"evaluation documents ({transformer.FULL['eval_docs']})")
    t.add_argument("--eval-context", type=int, default=None,
                   help=f"next bytes predicted per document ({transformer.FULL['eval_context']})")
    t.add_argument("--contexts", default=None, help="context lengths of the p @ v sweep "
                   f"({','.join(map(str, transformer.FULL['contexts']))})")
    t.add_argument("--train-steps", type=int, default=None, help="steps of the training run through the units "
                   f"({transformer.FULL['train_steps']}; 0: none)")
    t.add_argument("--retrain", action="store_true", help="train the float32 model (cached in --out) instead of "
                   "loading the shipped weights")
    p.set_defaults(func=cmd_study_net)
