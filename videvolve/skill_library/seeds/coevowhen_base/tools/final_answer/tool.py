"""final_answer: handled by the solver loop; calling it directly just returns the answer."""


def run(ctx, answer: str) -> dict:
    return {"text": str(answer)}
