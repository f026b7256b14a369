"""The usage page in headless Chromium: the browser tests' fixtures
(tests/browser/conftest.py), package-scoped here as there."""

from tests.browser.conftest import (
    base_url,
    chromium,
    context,
    guard,
    page,
    pytest_runtest_makereport,
)

__all__ = ["base_url", "chromium", "context", "guard", "page", "pytest_runtest_makereport"]
