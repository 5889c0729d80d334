# The user suite is a separate project's tests, run as such by test_pytest_plugin.py, never collected here.
collect_ignore = ["user_suite"]
