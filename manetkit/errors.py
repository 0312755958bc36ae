"""Errors shared by every part of manetkit."""


class UserError(Exception):
    """Caused by the user's input (bad config field, unknown lab, ...).

    The CLI prints the message without a traceback and exits with status 2, so the
    message must say which field or name is wrong and why.
    """
