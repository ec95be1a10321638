"""The version of jwmma (the package's ``__version__`` and ``jwmma --version``; pyproject.toml
states it for packaging)."""

__all__ = ["__version__"]

__version__ = "0.1.0"
