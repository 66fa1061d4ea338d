; expect: ^unterminated_string\.s:3:8: error: unterminated string$
; A model name without its closing quote.
.model "mlp
