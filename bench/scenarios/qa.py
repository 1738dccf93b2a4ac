"""QA scenario (a simulation of MINJA): the product's demo builder, ``audits.demo.qa``."""

from audits.demo.qa import build_qa

__all__ = ["build_qa"]
