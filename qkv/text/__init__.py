"""Language-level text handling shared by the applications (search, explain, summarize).

Sits below the applications and beside the model: it imports no application, and any of them may
import it. ``qkv.text.zh``: Chinese folding (traditional → simplified) and word segmentation;
``qkv.text.keywords``: the keyword tokenizer (titles and queries alike become keyword terms).
"""
