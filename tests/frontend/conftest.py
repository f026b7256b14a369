"""The frontend tests share helpers through plain modules that the test modules
import (``chart_support`` for the chart builders, ``policy_editor_support`` for
the policy editor). Registering them here has pytest rewrite their asserts too,
so a failing check inside a shared helper reports its values just as it would
inside a test module."""

import pytest

pytest.register_assert_rewrite(
    "tests.frontend.chart_support", "tests.frontend.policy_editor_support"
)
