"""A local lmms-eval task over SynthWorld questions (documents: {"video", "question", "options", "answer"})."""


def doc_to_visual(doc):
    return [doc["video"]]


def doc_to_text(doc, lmms_eval_specific_kwargs=None):
    options = doc.get("options") or []
    return "\n".join([doc["question"], *[f"{chr(65 + i)}) {o}" for i, o in enumerate(options)]])


def process_results(doc, results):
    return {"accuracy": float(str(results[0]).strip() == doc["answer"])}
