"""What the Python tests share: a call the module must refuse with a ValueError naming a text."""


def refused(call, text):
    try:
        call()
    except ValueError as e:
        assert text in str(e), (str(e), text)
        return
    raise AssertionError(f"not refused: {text}")
