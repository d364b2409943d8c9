"""The errors qkv raises on purpose: each says what was wrong and what to do about it."""


class QkvError(Exception):
    """Base class: a problem with the user's input or files, explained in the message."""


class ModelError(QkvError):
    """A model directory, its weights or its config cannot be used."""


class InputError(QkvError, ValueError):
    """A text, option or argument is not usable as given."""
