"""The app's model thread: all work on one thread, results and errors handed back."""

import threading

import pytest

from bita.serve.model_thread import ModelThread


def test_every_step_of_an_iterator_runs_on_the_same_other_thread():
    model = ModelThread()
    seen = []

    def steps():
        for i in range(4):
            seen.append(threading.current_thread())
            yield i

    assert list(model.iterate(steps())) == [0, 1, 2, 3]
    assert len(set(seen)) == 1 and seen[0] is not threading.current_thread()
    assert model.call(threading.current_thread) is seen[0]
    made = []
    assert list(model.stream(lambda n: made.append(threading.current_thread()) or steps(), 0)) == [0, 1, 2, 3]
    assert made == [seen[0]] and set(seen) == {seen[0]}  # stream: the iterator made there too


def test_errors_reach_the_caller():
    model = ModelThread()

    def failing():
        yield 1
        raise ValueError("bad step")

    items = model.iterate(failing())
    assert next(items) == 1
    with pytest.raises(ValueError, match="bad step"):
        next(items)
    with pytest.raises(ZeroDivisionError):
        model.call(lambda: 1 / 0)


def test_an_iterator_left_early_is_closed_on_the_model_thread():
    """A visitor who leaves stops the stream: what the request's iterator holds is given back there and then, on the
    model thread, not whenever it is collected."""
    model = ModelThread()
    closed_on = []

    def steps():
        try:
            yield from range(100)
        finally:
            closed_on.append(threading.current_thread())

    stream = model.iterate(steps())
    assert next(stream) == 0 and not closed_on
    stream.close()
    assert closed_on == [model.call(threading.current_thread)]
