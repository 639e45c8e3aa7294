"""LGIP (language-guided invariance probing): paraphrase invariance and one-word flip sensitivity of
image–text scorers. The protocol on one page: README.md beside this file.

Import from the modules (``perturb``, ``paraphrase``, ``flips``, ``strength``, ``metrics``, ...): this
package stays empty so that registering its fixtures at plugin load imports nothing else.
"""
