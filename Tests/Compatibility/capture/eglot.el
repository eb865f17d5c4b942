;;; eglot.el --- capture the frames eglot (jsonrpc.el) sends -*- lexical-binding: t -*-
;; Captures initialize, initialized, shutdown and exit exactly as eglot 1.9 (Debian's
;; elpa-eglot) on Emacs's own jsonrpc.el writes them, by recording every string jsonrpc hands
;; to `process-send-string'. Run by capture.sh:
;;   TOKENRELAY_BIN=... CAPTURE_OUT=frames.bin CAPTURE_ROOT=dir emacs --batch -l eglot.el
;; (jsonrpc-shutdown deletes the process right after `exit', so the server's own exit code is
;; not observable from eglot; the replay test checks it.)
(package-initialize)
(require 'eglot)
(let* ((out (getenv "CAPTURE_OUT"))
       (root (file-name-as-directory (getenv "CAPTURE_ROOT")))
       (default-directory root)
       (contact (list (getenv "TOKENRELAY_BIN") "serve"))
       (coding-system-for-write 'binary))
  (when (file-exists-p out) (delete-file out))
  (advice-add 'process-send-string :before
              (lambda (_process string) (write-region string nil out 'append 'silent)))
  (let ((server (eglot '(fundamental-mode) (cons 'transient root) 'eglot-lsp-server contact "tokenrelay")))
    (eglot-shutdown server)
    (message "captured %d bytes" (file-attribute-size (file-attributes out)))))
