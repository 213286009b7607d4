import math

import pytest

from actors.common.arith import CalcError, evaluate, find_expression, format_number


@pytest.mark.parametrize(
    ("expression", "expected"),
    [
        ("1 + 2 * 3", 7),
        ("(1 + 2) * 3", 9),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("2 ** 10", 1024),
        ("2^10", 1024),
        ("-3 + +5", 2),
        ("3 x 4", 12),
        ("3×4", 12),
        ("12 ÷ 4", 3),
        ("1,000 + 2,500", 3500),
        ("1,234,567 * 1", 1234567),
        ("max(1,2)", 2),
        ("min(4, 2, 9)", 2),
        ("sqrt(16)", 4),
        ("abs(-2.5)", 2.5),
        ("round(2.567, 2)", 2.57),
        ("floor(2.7) + ceil(2.1)", 5),
        ("log10(1000)", 3),
        ("exp(0)", 1),
        ("1.5e3", 1500),
    ],
)
def test_evaluate(expression: str, expected: float) -> None:
    assert evaluate(expression) == pytest.approx(expected)


def test_constants_and_trig() -> None:
    assert evaluate("pi") == pytest.approx(math.pi)
    assert evaluate("log(e)") == pytest.approx(1.0)
    assert evaluate("sin(0) + cos(0) + tan(0)") == pytest.approx(1.0)


def test_integer_results_stay_ints() -> None:
    result = evaluate("2 ** 64")
    assert isinstance(result, int) and result == 18446744073709551616


@pytest.mark.parametrize("expression", ["1/0", "5 // 0", "5 % 0", "0 ** -1"])
def test_division_by_zero(expression: str) -> None:
    with pytest.raises(CalcError, match="division by zero"):
        evaluate(expression)


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os')",
        "__import__('os').system('true')",
        "(1).__class__",
        "x",
        "foo + 1",
        "lambda: 1",
        "[i for i in range(3)]",
        "(i for i in range(3))",
        "{1: 2}",
        "'a' * 3",
        "open('/etc/passwd')",
        "sqrt(x=4)",
        "True + 1",
        "1j",
        "1 < 2",
        "1 if 1 else 2",
        "1,2",
        "",
        "2 +",
    ],
)
def test_refused_syntax(expression: str) -> None:
    with pytest.raises(CalcError):
        evaluate(expression)


def test_calc_error_is_value_error_with_plain_message() -> None:
    with pytest.raises(ValueError) as info:
        evaluate("a.b")
    assert str(info.value).startswith("unsupported syntax")


@pytest.mark.parametrize("expression", ["2 ** 1001", "9 ** 9 ** 9", "10 ** 200", "2.5 ** 900", "(10**50) * (10**60)"])
def test_huge_results_refused(expression: str) -> None:
    with pytest.raises(CalcError):
        evaluate(expression)


def test_float_overflow_refused() -> None:
    with pytest.raises(CalcError, match="too large"):
        evaluate("1e308 * 10")
    with pytest.raises(CalcError, match="too large"):
        evaluate("exp(1000)")


def test_complex_result_refused() -> None:
    with pytest.raises(CalcError, match="real"):
        evaluate("(-8) ** 0.5")


def test_domain_errors_are_calc_errors() -> None:
    with pytest.raises(CalcError):
        evaluate("sqrt(-1)")
    with pytest.raises(CalcError):
        evaluate("log(0)")


def test_length_and_depth_limits() -> None:
    with pytest.raises(CalcError, match="too long"):
        evaluate("1+" * 100 + "1")
    assert evaluate("+".join(["1"] * 100)) == 100
    with pytest.raises(CalcError):
        evaluate("-" * 150 + "1")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("what is 12 * (3 + 4)?", "12 * (3 + 4)"),
        ("calculate 2^10", "2^10"),
        ("how much is 15% of 80", "15/100*80"),
        ("What's 3 x 4?", "3 x 4"),
        ("what is 7 divided by 2", "7 / 2"),
        ("what is the 2+2", "2+2"),
        ("(what is 2+2)", "2+2"),
        ("sqrt(16) + 2, please", "sqrt(16) + 2"),
        ("what is 1,000 + 2,500?", "1,000 + 2,500"),
    ],
)
def test_find_expression(text: str, expected: str) -> None:
    assert find_expression(text) == expected


@pytest.mark.parametrize(
    "text",
    ["I have 3 cats", "it is -5 outside", "about 1,000 people", "hello there", "a well-known fact", "pi is nice"],
)
def test_find_expression_none(text: str) -> None:
    assert find_expression(text) is None


def test_found_expressions_evaluate() -> None:
    assert evaluate(find_expression("how much is 15% of 80") or "") == pytest.approx(12)
    assert evaluate(find_expression("what is 12 * (3 + 4)?") or "") == 84


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (12, "12"),
        (2**70, str(2**70)),
        (5.0, "5"),
        (0.1 + 0.2, "0.3"),
        (1 / 3, "0.3333333333"),
        (2.50, "2.5"),
        (-0.0, "0"),
        (1e20, "1e+20"),
    ],
)
def test_format_number(value: float, expected: str) -> None:
    assert format_number(value) == expected


@pytest.mark.parametrize("expression, expected", [
    ("15% of 80", 12), ("17.5% * 240", 42), ("17.5% of 240", 42), ("20% + 5", 5.2), ("15 % of 80", 12),
    ("10 % 3", 1), ("10%3", 1),            # modulo stays modulo
])
def test_percentages_as_people_write_them(expression: str, expected: float) -> None:
    assert evaluate(expression) == pytest.approx(expected)


def test_words_are_named_with_how_to_write_the_expression() -> None:
    with pytest.raises(CalcError) as refused:
        evaluate("5 miles * 1.60934 kilometers per mile")
    message = str(refused.value)
    assert "miles" in message and "'5 * 1.60934'" in message
    assert evaluate("1.5e3 + 1") == 1501


def test_sums_and_averages_over_any_number_of_values() -> None:
    # "What's the average?" of a chart's numbers: the model writes average(...), as people do.
    assert evaluate("average(5000, 7000, 6500)") == pytest.approx(6166.6667, abs=1e-3)
    assert evaluate("mean(2, 4)") == evaluate("avg(2, 4)") == 3
    assert evaluate("sum(1, 2, 3.5)") == 6.5
    with pytest.raises(CalcError, match="average"):
        evaluate("average()")
