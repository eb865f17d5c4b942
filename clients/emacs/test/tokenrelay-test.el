;;; tokenrelay-test.el --- End-to-end tests of tokenrelay.el  -*- lexical-binding: t; -*-

;;; Commentary:

;; tokenrelay.el inside a real batch Emacs, driving the real binary against
;; the interop stack (a real Django OAuth Toolkit AS and the SSE resource
;; server):
;;
;;   TOKENRELAY_STACK_ENV=.../stack.env [TOKENRELAY_BIN=...] \
;;     emacs --batch -Q -l clients/emacs/test/tokenrelay-test.el \
;;       -f ert-run-tests-batch-and-exit
;;
;; Ends with a line "N passed, N failed".  TOKENRELAY_TRANSCRIPT=FILE also
;; writes the session (commands and what they showed) to FILE.

;;; Code:

(require 'ert)
(require 'cl-lib)
(require 'subr-x)

(defconst tokenrelay-test--here
  (file-name-directory (or load-file-name buffer-file-name)))
(defconst tokenrelay-test--repo
  (expand-file-name "../../.." tokenrelay-test--here))

(add-to-list 'load-path (expand-file-name ".." tokenrelay-test--here))
(require 'tokenrelay)

(defun tokenrelay-test--read-stack ()
  "The interop stack's variables (an alist), or nil without a stack."
  (let ((file (getenv "TOKENRELAY_STACK_ENV")))
    (when (and file (file-readable-p file))
      (with-temp-buffer
        (call-process "bash" nil t nil "-c"
                      "set -a; . \"$1\"; exec python3 -c 'import json, os; print(json.dumps(dict(os.environ)))'"
                      "bash" file)
        (goto-char (point-min))
        (json-parse-buffer :object-type 'alist)))))

(defvar tokenrelay-test--stack (tokenrelay-test--read-stack))

(defun tokenrelay-test--var (name &optional default)
  "The stack variable NAME, else DEFAULT."
  (or (alist-get (intern name) tokenrelay-test--stack) default))

(defvar tokenrelay-test--secret (tokenrelay-test--var "CLIENT_SECRET" "svc-secret"))
(defvar tokenrelay-test--client-id (tokenrelay-test--var "CLIENT_ID" "svc"))
(defvar tokenrelay-test--binary
  (or (getenv "TOKENRELAY_BIN")
      (expand-file-name ".build/debug/tokenrelay" tokenrelay-test--repo)))
(defvar tokenrelay-test--dir (make-temp-file "tokenrelay-el-" t))
(defvar tokenrelay-test--transcript nil)

(defun tokenrelay-test--record (&rest lines)
  "Add LINES to the transcript (without trailing blanks)."
  (setq tokenrelay-test--transcript
        (append tokenrelay-test--transcript
                (mapcar (lambda (l) (string-trim-right l)) lines))))

(defvar tokenrelay-test--has-login
  (and tokenrelay-test--stack (file-executable-p tokenrelay-test--binary)
       (with-temp-buffer
         (insert "{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\"}\n")
         (call-process-region (point-min) (point-max) tokenrelay-test--binary
                              t t nil "--framing" "ndjson")
         (goto-char (point-min))
         (search-forward "\"login\"" nil t)))
  "Non-nil when the binary implements login (the config then has `tv').")

(when tokenrelay-test--stack
  ;; Environment `stack' on the resource server; profile `service' (client
  ;; credentials at the real AS) reads its secret from the environment;
  ;; with login, profile `tv' is a device-code login of the client tv.
  (let ((config (expand-file-name "config.yaml" tokenrelay-test--dir)))
    (with-temp-file config
      (insert
       (json-serialize
        `(:version 1
          :default_environment "stack"
          :environments
          (:stack
           (:base_url ,(tokenrelay-test--var "RS_URL")
            :default_profile "service"
            :profiles
            (:service
             (:type "client_credentials"
              :issuer ,(tokenrelay-test--var "ISSUER")
              :token_url ,(tokenrelay-test--var "TOKEN_URL")
              :client_id ,tokenrelay-test--client-id
              :client_secret (:env "TOKENRELAY_EMACS_TEST_SECRET"))
             ,@(when tokenrelay-test--has-login
                 `(:tv
                   (:type "device_code"
                    :issuer ,(tokenrelay-test--var "ISSUER")
                    :token_url ,(tokenrelay-test--var "TOKEN_URL")
                    :device_authorization_url
                    ,(concat (tokenrelay-test--var "AS_URL")
                             "/o/device-authorization/")
                    :client_id "tv"))))))))))
    (setq tokenrelay-program tokenrelay-test--binary
          tokenrelay-config config
          tokenrelay-log-level "debug" ; the canary reads every log line
          tokenrelay-process-environment
          (list (concat "TOKENRELAY_EMACS_TEST_SECRET=" tokenrelay-test--secret)))))

(defmacro tokenrelay-test--needs-stack ()
  "Skip the test without a stack or a binary."
  `(unless (and tokenrelay-test--stack
                (file-executable-p tokenrelay-test--binary))
     (ert-skip "no interop stack (TOKENRELAY_STACK_ENV) or no binary")))

(defun tokenrelay-test--wait (seconds predicate what)
  "Wait up to SECONDS for PREDICATE; fail naming WHAT."
  (let ((deadline (+ (float-time) seconds)))
    (while (and (not (funcall predicate)) (< (float-time) deadline))
      (accept-process-output nil 0.05))
    (unless (funcall predicate)
      (ert-fail (format "timed out waiting for %s" what)))))

(defvar tokenrelay-test--responses 0)
(add-hook 'tokenrelay-response-hook
          (lambda () (cl-incf tokenrelay-test--responses)))

(defun tokenrelay-test--call (method path &optional body)
  "Run `tokenrelay-call' and wait for its buffer; return the last response."
  (let ((before tokenrelay-test--responses))
    (tokenrelay-call method path body)
    (tokenrelay-test--wait 30 (lambda () (> tokenrelay-test--responses before))
                           (format "tokenrelay-call %s %s" method path))
    tokenrelay-last-response))

(defun tokenrelay-test--buffer-lines (buffer)
  "The lines of BUFFER."
  (with-current-buffer buffer
    (split-string (buffer-substring-no-properties (point-min) (point-max))
                  "\n")))

(defun tokenrelay-test--session (status profile)
  "The session of PROFILE in environment stack in STATUS."
  (cl-find-if (lambda (s) (and (equal (plist-get s :environment) "stack")
                               (equal (plist-get s :profile) profile)))
              (plist-get status :sessions)))

(ert-deftest tokenrelay-test-00-byte-compiles-cleanly ()
  "tokenrelay.el byte-compiles with warnings as errors."
  (let* ((dir (make-temp-file "tokenrelay-bc-" t))
         (copy (expand-file-name "tokenrelay.el" dir)))
    (unwind-protect
        (progn
          (copy-file (expand-file-name "../tokenrelay.el" tokenrelay-test--here)
                     copy)
          (with-temp-buffer
            (let ((status (call-process
                           (expand-file-name invocation-name
                                             invocation-directory)
                           nil t nil "--batch" "-Q"
                           "--eval" "(setq byte-compile-error-on-warn t)"
                           "-f" "batch-byte-compile" copy)))
              (should (equal (list status (string-trim (buffer-string)))
                             '(0 ""))))))
      (delete-directory dir t))))

(ert-deftest tokenrelay-test-01-initialize ()
  "initialize reports the server, its environments and methods."
  (tokenrelay-test--needs-stack)
  (let ((info (tokenrelay-info 20)))
    (should info)
    (should (equal (plist-get (plist-get info :serverInfo) :name) "tokenrelay"))
    (let ((env (aref (plist-get info :environments) 0)))
      (should (equal (plist-get env :name) "stack"))
      (should (eq (plist-get env :default) t)))
    (should (seq-contains-p (plist-get (plist-get info :capabilities) :methods)
                            "request"))
    (should (tokenrelay-running-p))))

(ert-deftest tokenrelay-test-02-get ()
  "An authenticated GET returns the resource server's view of the client."
  (tokenrelay-test--needs-stack)
  (let ((r (tokenrelay-request '(:path "/whoami"))))
    (should (= (plist-get r :status) 200))
    (should (equal (plist-get (plist-get r :json) :client_id)
                   tokenrelay-test--client-id))
    (should (equal (plist-get (plist-get r :headers) :content-type)
                   "application/json"))))

(ert-deftest tokenrelay-test-03-post ()
  "An authenticated POST with a JSON body reaches the resource server once."
  (tokenrelay-test--needs-stack)
  (let* ((tag (format "emacs-post-%s" (float-time)))
         (r (tokenrelay-request
             `(:method "POST" :path "/echo" :headers (:X-Request-Tag ,tag)
               :query nil
               :json (:name "emacs" :n 3 :list [1 2]
                      :empty ,(make-hash-table))))))
    (should (= (plist-get r :status) 200))
    (let ((echo (plist-get r :json)))
      (should (equal (plist-get echo :method) "POST"))
      (should (equal (plist-get echo :client_id) tokenrelay-test--client-id))
      (should (equal (json-parse-string (plist-get echo :body)
                                        :object-type 'alist)
                     '((name . "emacs") (n . 3) (list . [1 2]) (empty)))))
    (let ((counters (tokenrelay-request
                     `(:path "/counters" :query (:tag ,tag) :auth nil))))
      (should (= (plist-get (plist-get counters :json) :received) 1)))))

(ert-deftest tokenrelay-test-04-not-found-is-data ()
  "A 404 is a response, not an error."
  (tokenrelay-test--needs-stack)
  (should (= (plist-get (tokenrelay-request '(:path "/status/404")) :status)
             404)))

(ert-deftest tokenrelay-test-05-call-command ()
  "`tokenrelay-call' shows GET, POST and a 404 in the response buffer."
  (tokenrelay-test--needs-stack)
  (tokenrelay-test--record "M-x tokenrelay-call RET GET RET /whoami RET RET")
  (let ((last (tokenrelay-test--call "GET" "/whoami")))
    (should (= (plist-get (plist-get last :response) :status) 200))
    (with-current-buffer "*tokenrelay response*"
      (goto-char (point-min))
      (should (looking-at-p "GET /whoami -> 200"))
      (should (search-forward (format "\"client_id\": \"%s\""
                                      tokenrelay-test--client-id)
                              nil t))
      (apply #'tokenrelay-test--record
             (tokenrelay-test--buffer-lines (current-buffer)))))
  (tokenrelay-test--record
   "M-x tokenrelay-call RET POST RET /echo RET {\"hello\": \"from emacs\"} RET")
  (let ((last (tokenrelay-test--call "POST" "/echo" "{\"hello\": \"from emacs\"}")))
    (should (equal (plist-get (plist-get (plist-get last :response) :json) :body)
                   "{\"hello\":\"from emacs\"}"))
    (apply #'tokenrelay-test--record
           (tokenrelay-test--buffer-lines "*tokenrelay response*")))
  (tokenrelay-test--record "M-x tokenrelay-call RET GET RET /nope RET RET")
  (let ((last (tokenrelay-test--call "GET" "/nope")))
    (should-not (plist-get last :error))
    (should (= (plist-get (plist-get last :response) :status) 404))
    (with-current-buffer "*tokenrelay response*"
      (goto-char (point-min))
      (should (looking-at-p "GET /nope -> 404")))
    (apply #'tokenrelay-test--record
           (tokenrelay-test--buffer-lines "*tokenrelay response*"))))

(ert-deftest tokenrelay-test-06-subscribe ()
  "Subscribe delivers 5 events in order; unsubscribe closes it."
  (tokenrelay-test--needs-stack)
  (let* ((events nil) (states nil)
         (sub (tokenrelay-subscribe
               '(:path "/events" :query (:count -1 :interval 0.05))
               (lambda (event) (setq events (append events (list event))))
               :on-state (lambda (s) (push (plist-get s :state) states)))))
    (tokenrelay-test--wait 30 (lambda () (>= (length events) 5)) "5 events")
    (tokenrelay-unsubscribe sub)
    (tokenrelay-test--wait 30 (lambda () (equal (car states) "closed"))
                           "the closed state")
    (should (= (length events) 5))
    (cl-loop for event in events for i from 1
             do (should (equal (plist-get event :id) (number-to-string i)))
             (should (equal (plist-get event :event) "tick"))
             (should (= (plist-get (json-parse-string (plist-get event :data)
                                                      :object-type 'plist)
                                   :seq)
                        i)))
    (should (member "open" states))
    (should (= (plist-get (tokenrelay-status-result) :subscriptions) 0))
    (should (null (tokenrelay-subscriptions)))))

(ert-deftest tokenrelay-test-07-events-command ()
  "`tokenrelay-events' fills a buffer; killing it unsubscribes."
  (tokenrelay-test--needs-stack)
  (tokenrelay-test--record "" "M-x tokenrelay-events RET /events RET")
  (let ((buffer (tokenrelay-events "/events")))
    (tokenrelay-test--wait
     30 (lambda ()
          (>= (cl-count-if (lambda (l) (string-match-p "\\] tick: " l))
                           (tokenrelay-test--buffer-lines buffer))
              5))
     "5 event lines")
    (apply #'tokenrelay-test--record (tokenrelay-test--buffer-lines buffer))
    (kill-buffer buffer)
    (tokenrelay-test--wait 30 (lambda () (null (tokenrelay-subscriptions)))
                           "the subscription to close")
    (should (= (plist-get (tokenrelay-status-result) :subscriptions) 0))))

(ert-deftest tokenrelay-test-08-cancel ()
  "Cancelling a slow request answers it with kind cancelled."
  (tokenrelay-test--needs-stack)
  (let* ((failure nil) (response nil)
         (id (tokenrelay-request '(:path "/slow" :query (:delay 60) :auth nil)
                                 :callback (lambda (r) (setq response r))
                                 :error-callback (lambda (e) (setq failure e)))))
    (should (string-match-p " 1 req" (tokenrelay-mode-line)))
    (tokenrelay-cancel id)
    (tokenrelay-test--wait 20 (lambda () failure) "the cancelled answer")
    (should-not response)
    (should (equal (plist-get failure :kind) "cancelled"))
    (should (= (plist-get failure :code) -32800)))
  ;; A client-side bound cancels too, and the process keeps serving.
  (let ((err (should-error (tokenrelay-request '(:path "/slow" :query (:delay 60)
                                                 :auth nil)
                                               :timeout 0.3)
                           :type 'tokenrelay-error)))
    (should (equal (tokenrelay-error-kind err) "timeout")))
  (should (= (plist-get (tokenrelay-request '(:path "/whoami")) :status) 200)))

(ert-deftest tokenrelay-test-08b-jsonrpc-native-encoding ()
  "jsonrpc.el's own encoding of no params (\"params\": null) is accepted."
  (tokenrelay-test--needs-stack)
  (tokenrelay-info 20)
  ;; What eglot does: jsonrpc-request with nil params, sent as null.
  (should (null (jsonrpc-request tokenrelay--connection :ping nil)))
  (let ((status (jsonrpc-request tokenrelay--connection :status nil)))
    (should (plist-member status :sessions))))

(ert-deftest tokenrelay-test-09-error-kind ()
  "Errors carry their kind: an unknown environment."
  (tokenrelay-test--needs-stack)
  (let ((err (should-error (tokenrelay-request '(:path "/whoami"
                                                 :environment "nope"))
                           :type 'tokenrelay-error)))
    (should (equal (tokenrelay-error-kind err) "unknown_environment"))
    (setq tokenrelay-last-error nil)))

(ert-deftest tokenrelay-test-10-status ()
  "Status shows the session; invalidate renews once; the status table."
  (tokenrelay-test--needs-stack)
  (let* ((s (tokenrelay-test--session (tokenrelay-status-result) "service"))
         (counters (plist-get s :counters))
         (before (+ (plist-get counters :acquisitions)
                    (plist-get counters :renewals))))
    (should (equal (plist-get s :state) "valid"))
    (should (>= (plist-get counters :requests) 4))
    (should (= (tokenrelay-invalidate "stack" "service") 1))
    (should (= (plist-get (tokenrelay-request '(:path "/whoami")) :status) 200))
    (let ((c (plist-get (tokenrelay-test--session (tokenrelay-status-result)
                                                  "service")
                        :counters)))
      (should (= (+ (plist-get c :acquisitions) (plist-get c :renewals))
                 (1+ before)))))
  (tokenrelay-test--record "" "M-x tokenrelay-status")
  (with-current-buffer (tokenrelay-status)
    (should (eq major-mode 'tokenrelay-status-mode))
    (goto-char (point-min))
    (should (search-forward "service" nil t))
    (should (equal (tabulated-list-get-id) '("stack" . "service")))
    (revert-buffer) ; g: a fresh status
    (goto-char (point-min))
    (should (search-forward "service" nil t))
    (apply #'tokenrelay-test--record
           (cons (mapconcat (lambda (column)
                              (let ((name (nth 0 column)) (width (nth 1 column)))
                                (if (> width 0) (string-pad name width) name)))
                            tabulated-list-format " ")
                 (tokenrelay-test--buffer-lines (current-buffer))))))

(ert-deftest tokenrelay-test-11-mode-line ()
  "The mode-line text shows a running process."
  (tokenrelay-test--needs-stack)
  (should (string-prefix-p "tokenrelay" (tokenrelay-mode-line))))

(ert-deftest tokenrelay-test-12-round-trip ()
  "The round trip of `tokenrelay-call' (a figure, not an assertion)."
  (tokenrelay-test--needs-stack)
  (dolist (path '("/whoami" "/public/echo"))
    (let (times)
      (dotimes (_ 50)
        (let ((t0 (float-time)))
          (should (= (plist-get (plist-get (tokenrelay-test--call "GET" path)
                                           :response)
                                :status)
                     200))
          (push (* 1000 (- (float-time) t0)) times)))
      (setq times (sort times #'<))
      (message "# round trip tokenrelay-call GET %s -> buffer: median %.1f ms, min %.1f, p90 %.1f (n=50)"
               path (nth 24 times) (nth 0 times) (nth 44 times)))))

(ert-deftest tokenrelay-test-12b-auth-prompt ()
  "An auth-prompt notification reaches `tokenrelay-auth-prompt-function'.
The frame goes through jsonrpc.el's real decoding and dispatch."
  (tokenrelay-test--needs-stack)
  (tokenrelay-info 20)
  (let* ((seen nil)
         (tokenrelay-auth-prompt-function (lambda (p) (setq seen p)))
         (body (json-serialize
                '(:jsonrpc "2.0" :method "auth-prompt"
                  :params (:environment "stack" :profile "tv" :kind "device"
                           :url "http://127.0.0.1:1/device"
                           :userCode "WDJB-MJHT"
                           :expiresAt "2026-12-01T12:00:00Z")))))
    (funcall (process-filter tokenrelay--process) tokenrelay--process
             (format "Content-Length: %d\r\n\r\n%s" (string-bytes body) body))
    (should (equal (plist-get seen :userCode) "WDJB-MJHT"))
    ;; The default function's text (batch Emacs: no y-or-n-p).
    (let ((shown nil))
      (cl-letf (((symbol-function 'message)
                 (lambda (fmt &rest args) (setq shown (apply #'format fmt args)))))
        (tokenrelay-show-auth-prompt seen))
      (should (equal shown "tokenrelay: log in to stack/tv: open http://127.0.0.1:1/device and enter the code WDJB-MJHT (before 2026-12-01T12:00:00Z)")))))

(ert-deftest tokenrelay-test-13-login ()
  "Login with a device code: auth-prompt, approval, requests as the person."
  (tokenrelay-test--needs-stack)
  (unless (seq-contains-p (plist-get (plist-get (tokenrelay-info 20)
                                                :capabilities)
                                     :methods)
                          "login")
    (ert-skip "this tokenrelay has no login method (login is untested)"))
  (let* ((prompts nil) (approver nil) (outcome 'pending)
         (tokenrelay-auth-prompt-function
          (lambda (prompt)
            (push prompt prompts)
            ;; What the person does: sign in at the AS, enter the code, accept.
            (setq approver
                  (start-process "approve" nil "python3"
                                 (expand-file-name "../../neovim/test/approve_device.py"
                                                   tokenrelay-test--here)
                                 (tokenrelay-test--var "AS_URL")
                                 (plist-get prompt :userCode))))))
    (tokenrelay-login "stack" "tv" (lambda (e r) (setq outcome (list e r))))
    (tokenrelay-test--wait 90 (lambda () (not (eq outcome 'pending)))
                           "the login to finish")
    (should-not (car outcome))
    (should (eq (plist-get (cadr outcome) :loggedIn) t))
    (should (= (length prompts) 1))
    (should (equal (plist-get (car prompts) :kind) "device"))
    (tokenrelay-test--wait 30 (lambda () (not (process-live-p approver)))
                           "approve_device.py")
    (should (= (process-exit-status approver) 0))
    (let ((whoami (tokenrelay-request '(:path "/whoami" :profile "tv"))))
      (should (= (plist-get whoami :status) 200))
      (should (equal (plist-get (plist-get whoami :json) :username) "alice")))
    (tokenrelay-test--record
     "" "M-x tokenrelay-login RET stack RET tv RET"
     (format "auth-prompt: %s" (json-serialize (car prompts)))
     (format "result: %s" (json-serialize (cadr outcome))))))

(ert-deftest tokenrelay-test-14-shutdown ()
  "Shutdown exits with code 0."
  (tokenrelay-test--needs-stack)
  (tokenrelay-info 20)
  (let ((pid (process-id tokenrelay--process)))
    (should (eql (tokenrelay-shutdown) 0))
    (should-not (tokenrelay-running-p))
    (should-not (file-exists-p (format "/proc/%d" pid)))))

(ert-deftest tokenrelay-test-15-kill-emacs-hook ()
  "`kill-emacs-hook' stops a running process with code 0."
  (tokenrelay-test--needs-stack)
  (should (= (plist-get (tokenrelay-request '(:path "/whoami")) :status) 200))
  (should (memq #'tokenrelay--kill-emacs kill-emacs-hook))
  (let ((pid (process-id tokenrelay--process)))
    (tokenrelay--kill-emacs)
    (should-not (tokenrelay-running-p))
    (should (eql tokenrelay-last-exit-code 0))
    (should-not (file-exists-p (format "/proc/%d" pid)))))

(ert-deftest tokenrelay-test-16-no-secret-anywhere ()
  "No secret or token in any buffer, the message log or the stderr capture."
  (tokenrelay-test--needs-stack)
  (let* ((stderr (get-buffer " *tokenrelay stderr*"))
         (tokens (process-lines "python3"
                                (expand-file-name "scripts/interop/count_tokens.py"
                                                  tokenrelay-test--repo)
                                "--state" (tokenrelay-test--var "STATE_DIR")
                                "--kind" "all" "--values"))
         (needles (cons tokenrelay-test--secret tokens)))
    (should stderr)
    (should (> (buffer-size stderr) 0)) ; else the canary proves nothing
    (should (get-buffer "*tokenrelay events*"))
    (should tokens)
    (dolist (buffer (buffer-list))
      (with-current-buffer buffer
        (dolist (needle needles)
          (save-excursion
            (goto-char (point-min))
            (when (search-forward needle nil t)
              (ert-fail (format "a secret or token appears in %S"
                                (buffer-name buffer))))))))))

;; The closing line CI reads, after ERT's own summary.
(defun tokenrelay-test--summary (stats)
  "Print \"N passed, N failed\" for STATS; return STATS."
  (when (> (ert-stats-skipped stats) 0)
    (message "%d skipped" (ert-stats-skipped stats)))
  (message "%d passed, %d failed"
           (ert-stats-completed-expected stats)
           (ert-stats-completed-unexpected stats))
  (when-let ((file (getenv "TOKENRELAY_TRANSCRIPT")))
    (unless (string-empty-p file)
      (with-temp-file file
        (insert (string-join tokenrelay-test--transcript "\n") "\n"))))
  (delete-directory tokenrelay-test--dir t)
  stats)
(advice-add 'ert-run-tests-batch :filter-return #'tokenrelay-test--summary)

(provide 'tokenrelay-test)
;;; tokenrelay-test.el ends here
