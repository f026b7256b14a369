"""Fixtures this app's tests share with the jobs tests: the demo organisation."""

from tests.jobs.conftest import org

__all__ = ["org"]
