;;; tokenrelay.el --- Authenticated HTTP calls through tokenrelay  -*- lexical-binding: t; -*-

;; Version: 0.1.0
;; Package-Requires: ((emacs "28.1"))
;; Keywords: comm, tools
;; URL: https://github.com/tokenrelay/tokenrelay

;;; Commentary:

;; A client for tokenrelay, the process that holds authenticated HTTP
;; sessions (OAuth 2 clients, API keys, user logins) for other programs.
;; It starts one tokenrelay process on first use and talks JSON-RPC to
;; it with the built-in jsonrpc.el (Content-Length framing).
;;
;; Lisp API:
;;   (tokenrelay-request PARAMS)                       ; synchronous
;;   (tokenrelay-request PARAMS :callback FN)          ; asynchronous
;;   (tokenrelay-subscribe PARAMS HANDLER)             ; SSE events
;;   (tokenrelay-unsubscribe SUBSCRIPTION)
;;   (tokenrelay-status-result) (tokenrelay-invalidate) (tokenrelay-login)
;; Commands: `tokenrelay-call', `tokenrelay-status', `tokenrelay-events',
;; `tokenrelay-invalidate', `tokenrelay-logout', `tokenrelay-login',
;; `tokenrelay-show-log', `tokenrelay-shutdown', `tokenrelay-restart'.
;;
;; See README.md next to this file.

;;; Code:

(require 'cl-lib)
(require 'jsonrpc)
(require 'subr-x)
(require 'tabulated-list)
(require 'json)

(defconst tokenrelay-version "0.1.0"
  "Version of tokenrelay.el.")

(defgroup tokenrelay nil
  "Authenticated HTTP calls and event streams through tokenrelay."
  :group 'comm
  :prefix "tokenrelay-")

(defcustom tokenrelay-program (or (getenv "TOKENRELAY_BIN") "tokenrelay")
  "The tokenrelay executable: a file name or a command on `exec-path'."
  :type 'string)

(defcustom tokenrelay-config nil
  "Config file given to tokenrelay as --config.
nil lets tokenrelay choose: $TOKENRELAY_CONFIG, else
~/.config/tokenrelay/config.yaml."
  :type '(choice (const :tag "tokenrelay's default" nil) file))

(defcustom tokenrelay-environment nil
  "Default environment (--env), or nil for the config's default."
  :type '(choice (const :tag "The config's default" nil) string))

(defcustom tokenrelay-log-level nil
  "The --log-level of the process, or nil for its default (info)."
  :type '(choice (const :tag "Default" nil)
                 (const "error") (const "warn") (const "info")
                 (const "debug") (const "trace")))

(defcustom tokenrelay-extra-args nil
  "More arguments for `tokenrelay serve'."
  :type '(repeat string))

(defcustom tokenrelay-process-environment nil
  "Extra \"NAME=VALUE\" environment entries for the process.
Use them for the secrets the config reads with { env: NAME }."
  :type '(repeat string))

(defcustom tokenrelay-timeout 30
  "Seconds a synchronous call waits before it gives up and cancels."
  :type 'number)

(defcustom tokenrelay-events-buffer-size 100000
  "Maximum size of the *tokenrelay events* buffer (the JSON-RPC log).
0 disables it, nil means no limit."
  :type '(choice (const :tag "No limit" nil) integer))

(defcustom tokenrelay-auth-prompt-function #'tokenrelay-show-auth-prompt
  "Function called with an auth-prompt notification's params (a plist).
The default shows the URL (and code) and offers to open it."
  :type 'function)

(defcustom tokenrelay-browse-url-function #'browse-url
  "Function that opens a login URL."
  :type 'function)

(defcustom tokenrelay-notification-functions nil
  "Functions called with METHOD (a symbol) and PARAMS of notifications.
Run for every notification tokenrelay sends, after the built-in
handling of event, subscription-state, auth-prompt and auth-failed."
  :type 'hook)

(defvar tokenrelay-response-hook nil
  "Hook run in the response buffer after `tokenrelay-call' filled it.")

(define-error 'tokenrelay-error "tokenrelay error")

(defvar tokenrelay--connection nil
  "The running `tokenrelay-connection', or nil.")

(defvar tokenrelay--process nil
  "The process of `tokenrelay--connection'.")

(defvar tokenrelay--info nil
  "The initialize result of the running process, or nil.")

(defvar tokenrelay--subscriptions (make-hash-table :test #'equal)
  "Open subscriptions by id.")

(defvar tokenrelay--in-flight 0
  "Requests sent and not answered yet.")

(defvar tokenrelay-last-exit-code nil
  "Exit code of the last tokenrelay process that ended.")

(defvar tokenrelay-last-error nil
  "The last error a call returned: a plist (:code :message :kind :data).")

(defvar tokenrelay-last-response nil
  "What `tokenrelay-call' showed last: (:params :response :error :ms).")

;;;; The connection

(defclass tokenrelay-connection (jsonrpc-process-connection)
  ((last-request-id
    :initform nil
    :accessor tokenrelay--last-request-id
    :documentation "Id of the request sent last (to cancel it by id)."))
  :documentation "A jsonrpc.el connection to a tokenrelay process.")

(cl-defmethod jsonrpc-connection-send :before
  ((conn tokenrelay-connection) &rest args &key id method &allow-other-keys)
  "Remember the ID of each request (with METHOD) CONN sends.
ARGS are the message's members."
  (when (and id method)
    (setf (tokenrelay--last-request-id conn) id)))

(defun tokenrelay--command ()
  "The command line of `tokenrelay serve'."
  (append (list tokenrelay-program "serve" "--framing" "lsp")
          (when tokenrelay-config
            (list "--config" (expand-file-name tokenrelay-config)))
          (when tokenrelay-environment
            (list "--env" tokenrelay-environment))
          (when tokenrelay-log-level
            (list "--log-level" tokenrelay-log-level))
          tokenrelay-extra-args))

(defun tokenrelay--error (kind message &optional code data)
  "Signal a `tokenrelay-error' of KIND with MESSAGE, CODE and DATA."
  (signal 'tokenrelay-error
          (list message :kind kind :code code :data data)))

(defun tokenrelay-error-kind (err)
  "The kind (a string such as \"auth\") of the `tokenrelay-error' ERR."
  (plist-get (cddr err) :kind))

(defun tokenrelay-error-code (err)
  "The JSON-RPC code of the `tokenrelay-error' ERR, or nil."
  (plist-get (cddr err) :code))

(defun tokenrelay-error-data (err)
  "The data (a plist) of the `tokenrelay-error' ERR."
  (plist-get (cddr err) :data))

(defun tokenrelay--wire-error (error)
  "ERROR (a JSON-RPC error plist) with its data's kind as :kind."
  (let* ((data (plist-get error :data))
         (kind (or (and (listp data) (plist-get data :kind))
                   (if (eql (plist-get error :code) -1) "closed" "unknown"))))
    (list :code (plist-get error :code)
          :message (or (plist-get error :message) "error")
          :kind kind :data data)))

(defun tokenrelay-running-p ()
  "Non-nil while the tokenrelay process runs."
  (and tokenrelay--connection (jsonrpc-running-p tokenrelay--connection)))

(defun tokenrelay--on-shutdown (conn)
  "Forget CONN once its process ended; close its subscriptions."
  (when (eq conn tokenrelay--connection)
    (when tokenrelay--process
      (setq tokenrelay-last-exit-code
            (process-exit-status tokenrelay--process)))
    (setq tokenrelay--connection nil
          tokenrelay--info nil
          tokenrelay--in-flight 0)
    (let (subs)
      (maphash (lambda (_id sub) (push sub subs)) tokenrelay--subscriptions)
      (clrhash tokenrelay--subscriptions)
      (dolist (sub subs)
        (tokenrelay--subscription-state
         sub (list :subscription (tokenrelay-subscription-id sub)
                   :state "closed"
                   :error (list :kind "closed"
                                :message "tokenrelay exited")))))
    (force-mode-line-update t)))

(defun tokenrelay--start ()
  "Start tokenrelay; return the connection."
  (unless (executable-find tokenrelay-program)
    (tokenrelay--error "not_started"
                       (format "tokenrelay binary not found: %s"
                               tokenrelay-program)))
  (let* ((name "tokenrelay")
         (command (tokenrelay--command))
         (process-environment (append tokenrelay-process-environment
                                      process-environment))
         (conn
          (make-instance
           'tokenrelay-connection
           :name name
           :events-buffer-scrollback-size tokenrelay-events-buffer-size
           :notification-dispatcher #'tokenrelay--notification
           :request-dispatcher #'tokenrelay--server-request
           :on-shutdown #'tokenrelay--on-shutdown
           :process
           (lambda ()
             (setq tokenrelay--process
                   (make-process
                    :name name
                    :command command
                    :connection-type 'pipe
                    :coding 'utf-8-emacs-unix
                    :noquery t
                    ;; jsonrpc.el expects exactly this buffer name.
                    :stderr (get-buffer-create
                             (format "*%s stderr*" name))))))))
    (setq tokenrelay--connection conn
          tokenrelay--info nil
          tokenrelay--in-flight 0)
    (add-hook 'kill-emacs-hook #'tokenrelay--kill-emacs)
    (tokenrelay--send
     'initialize
     (list :processId (emacs-pid)
           :clientInfo (list :name "tokenrelay.el"
                             :version tokenrelay-version))
     (lambda (result) (setq tokenrelay--info result))
     (lambda (error)
       (message "tokenrelay: initialize failed: %s"
                (plist-get error :message))))
    conn))

(defun tokenrelay--ensure ()
  "The running connection; start one when none runs."
  (if (tokenrelay-running-p) tokenrelay--connection (tokenrelay--start)))

(defun tokenrelay--server-request (_conn method _params)
  "Refuse METHOD: tokenrelay sends no requests."
  (jsonrpc-error :code -32601 :message (format "no method %s" method)))

;;;; Requests

(defun tokenrelay--object (params)
  "PARAMS, or an empty JSON object when PARAMS is nil."
  (or params (make-hash-table)))

(defun tokenrelay--send (method params on-success on-error)
  "Send METHOD with PARAMS; call ON-SUCCESS or ON-ERROR once.
ON-SUCCESS gets the result, ON-ERROR a plist (:code :message :kind
:data).  Return the request id."
  (let ((conn (tokenrelay--ensure))
        (settled nil))
    (cl-incf tokenrelay--in-flight)
    (jsonrpc-async-request
     conn method (tokenrelay--object params)
     :success-fn (lambda (result)
                   (unless settled
                     (setq settled t)
                     (cl-decf tokenrelay--in-flight)
                     ;; A failing callback must not stop jsonrpc.el's filter
                     ;; from reading the messages after this one.
                     (with-demoted-errors "tokenrelay: callback: %S"
                       (funcall on-success result))))
     :error-fn (lambda (error)
                 (unless settled
                   (setq settled t)
                   (cl-decf tokenrelay--in-flight)
                   (let ((e (tokenrelay--wire-error error)))
                     (setq tokenrelay-last-error e)
                     (with-demoted-errors "tokenrelay: error callback: %S"
                       (funcall on-error e)))))
     ;; No client timer: jsonrpc.el would drop the continuation, and the
     ;; server's late answer would then hit a missing handler.
     :timeout nil)
    (tokenrelay--last-request-id conn)))

(defun tokenrelay-cancel (id)
  "Ask tokenrelay to cancel request ID (its error kind is \"cancelled\")."
  (when (tokenrelay-running-p)
    (jsonrpc-notify tokenrelay--connection '$/cancelRequest (list :id id))))

(defun tokenrelay--call-sync (method params &optional timeout)
  "Call METHOD with PARAMS and wait up to TIMEOUT seconds for the result.
Signal `tokenrelay-error' on an error answer; cancel the request on
timeout or quit."
  (let* ((timeout (or timeout tokenrelay-timeout))
         (done nil) (result nil) (failure nil)
         (id (tokenrelay--send method params
                               (lambda (r) (setq done t result r))
                               (lambda (e) (setq done t failure e))))
         (deadline (+ (float-time) timeout)))
    (unwind-protect
        (while (and (not done) (< (float-time) deadline))
          (accept-process-output tokenrelay--process
                                 (max 0.001 (- deadline (float-time)))))
      (unless done
        ;; Timed out, quit (C-g) or the process died: the answer, if it
        ;; comes, goes to the handlers above and is ignored.
        (setq done 'abandoned)
        (tokenrelay-cancel id)))
    (cond (failure
           (signal 'tokenrelay-error
                   (list (plist-get failure :message)
                         :kind (plist-get failure :kind)
                         :code (plist-get failure :code)
                         :data (plist-get failure :data))))
          ((eq done 'abandoned)
           (setq tokenrelay-last-error
                 (list :kind "timeout"
                       :message (format "no answer to %s within %s s"
                                        method timeout)))
           (tokenrelay--error "timeout"
                              (format "no answer to %s within %s s; cancelled"
                                      method timeout)))
          (t result))))

(cl-defun tokenrelay-call-method (method &optional params
                                         &key callback error-callback timeout)
  "Call any tokenrelay METHOD (a symbol) with PARAMS (a plist).
Like `tokenrelay-request': synchronous unless CALLBACK is given;
ERROR-CALLBACK and TIMEOUT as there."
  (if callback
      (tokenrelay--send method params callback
                        (or error-callback #'tokenrelay--report-error))
    (tokenrelay--call-sync method params timeout)))

(defun tokenrelay--report-error (error)
  "Show ERROR, a plist from a failed call."
  (message "tokenrelay: %s (%s)" (plist-get error :message)
           (plist-get error :kind)))

(defun tokenrelay--request-params (params)
  "PARAMS for request/subscribe, as the protocol wants them.
Empty object members are dropped, and :auth nil becomes false."
  (let (out)
    (cl-loop for (key value) on params by #'cddr
             do (cond ((memq key '(:query :headers :pathParams))
                       (when value (setq out (cl-list* value key out))))
                      ((eq key :auth)
                       (setq out (cl-list* (if (and value (not (eq value :json-false)))
                                               t :json-false)
                                           key out)))
                      (t (setq out (cl-list* value key out)))))
    (nreverse out)))

(cl-defun tokenrelay-request (params &key callback error-callback timeout)
  "Send an HTTP request through tokenrelay; PARAMS is a plist.
Keys: :method (default \"GET\"), :path (against the environment's
base URL) or :url, :pathParams, :query, :headers (plists), one of
:json (any JSON value: vectors are arrays, plists or hash tables
objects), :text or :base64, :environment, :profile, :timeoutMs and
:auth (nil or :json-false to send no credentials).

Without CALLBACK, wait up to TIMEOUT seconds (default
`tokenrelay-timeout') and return the response; signal
`tokenrelay-error' on failure.  With CALLBACK, return the request id
at once (for `tokenrelay-cancel') and later call CALLBACK with the
response or ERROR-CALLBACK with an error plist (:code :message :kind
:data).

A response is a plist (:status :headers :json|:text|:base64
:elapsedMs); any HTTP status, 404 or 500 included, is a response."
  (tokenrelay-call-method 'request (tokenrelay--request-params params)
                          :callback callback :error-callback error-callback
                          :timeout timeout))

(defun tokenrelay-response-body (response)
  "The body of RESPONSE: parsed JSON, text, or decoded bytes."
  (cond ((plist-member response :json) (plist-get response :json))
        ((plist-member response :text) (plist-get response :text))
        ((plist-member response :base64)
         (base64-decode-string (plist-get response :base64)))))

;;;; Subscriptions

(cl-defstruct (tokenrelay-subscription
               (:constructor tokenrelay--make-subscription)
               (:copier nil))
  "An SSE subscription."
  id handler on-state state closed unsubscribe-pending)

(defun tokenrelay--subscription-state (sub params)
  "Record the subscription-state PARAMS of SUB and pass them on."
  (setf (tokenrelay-subscription-state sub) params)
  (when (tokenrelay-subscription-on-state sub)
    (with-demoted-errors "tokenrelay: on-state: %S"
      (funcall (tokenrelay-subscription-on-state sub) params)))
  (when (equal (plist-get params :state) "closed")
    (setf (tokenrelay-subscription-closed sub) t)
    (remhash (tokenrelay-subscription-id sub) tokenrelay--subscriptions)
    (force-mode-line-update t)))

(cl-defun tokenrelay-subscribe (params handler &key on-state on-error)
  "Follow the Server-Sent-Events stream PARAMS names.
PARAMS as for `tokenrelay-request' (GET, no body) plus :lastEventId.
HANDLER is called with each event, a plist (:id :event :data :retry).
ON-STATE gets each subscription-state plist (:state is one of
\"connecting\", \"open\", \"reconnecting\", \"closed\"); ON-ERROR an
error plist when subscribe fails.  Return a `tokenrelay-subscription'
for `tokenrelay-unsubscribe'."
  (let ((sub (tokenrelay--make-subscription :handler handler
                                            :on-state on-state)))
    (tokenrelay--send
     'subscribe (tokenrelay--request-params params)
     (lambda (result)
       (let ((id (plist-get result :subscription)))
         (setf (tokenrelay-subscription-id sub) id)
         (puthash id sub tokenrelay--subscriptions)
         (when (tokenrelay-subscription-unsubscribe-pending sub)
           (tokenrelay--unsubscribe-now sub))))
     (lambda (error)
       (setf (tokenrelay-subscription-closed sub) t)
       (funcall (or on-error #'tokenrelay--report-error) error)))
    sub))

(defun tokenrelay--unsubscribe-now (sub)
  "Send unsubscribe for SUB."
  (tokenrelay--send 'unsubscribe
                    (list :subscription (tokenrelay-subscription-id sub))
                    #'ignore #'ignore))

(defun tokenrelay-unsubscribe (sub)
  "Close the subscription SUB; no event reaches its handler after this."
  (unless (tokenrelay-subscription-unsubscribe-pending sub)
    (setf (tokenrelay-subscription-unsubscribe-pending sub) t)
    (let ((open (and (tokenrelay-subscription-id sub)
                     (gethash (tokenrelay-subscription-id sub)
                              tokenrelay--subscriptions))))
      (setf (tokenrelay-subscription-closed sub) t)
      (when open (tokenrelay--unsubscribe-now sub)))))

(defun tokenrelay-subscriptions ()
  "The open subscriptions."
  (let (subs)
    (maphash (lambda (_id sub) (push sub subs)) tokenrelay--subscriptions)
    subs))

;;;; Notifications

(defun tokenrelay--notification (_conn method params)
  "Handle the notification METHOD with PARAMS."
  (pcase method
    ('event
     (let ((sub (gethash (plist-get params :subscription)
                         tokenrelay--subscriptions)))
       (when (and sub (not (tokenrelay-subscription-closed sub)))
         (with-demoted-errors "tokenrelay: event handler: %S"
           (funcall (tokenrelay-subscription-handler sub)
                    (list :id (plist-get params :id)
                          :event (or (plist-get params :event) "message")
                          :data (plist-get params :data)
                          :retry (plist-get params :retry)))))))
    ('subscription-state
     (let ((sub (gethash (plist-get params :subscription)
                         tokenrelay--subscriptions)))
       (when sub (tokenrelay--subscription-state sub params))))
    ('auth-prompt
     (with-demoted-errors "tokenrelay: auth prompt: %S"
       (funcall tokenrelay-auth-prompt-function params)))
    ('auth-failed
     (message "tokenrelay: renewal refused for %s/%s: %s"
              (plist-get params :environment) (plist-get params :profile)
              (or (plist-get params :oauthError)
                  (plist-get params :message) (plist-get params :kind)))))
  (run-hook-with-args 'tokenrelay-notification-functions method params))

(defun tokenrelay-show-auth-prompt (prompt)
  "Show the auth-prompt PROMPT and offer to open its URL."
  (let* ((url (or (plist-get prompt :verificationUriComplete)
                  (plist-get prompt :url)))
         (where (format "%s/%s" (plist-get prompt :environment)
                        (plist-get prompt :profile)))
         (code (plist-get prompt :userCode))
         (text (if code
                   (format "log in to %s: open %s and enter the code %s"
                           where (plist-get prompt :url) code)
                 (format "log in to %s: open %s" where url))))
    (message "tokenrelay: %s%s" text
             (if (plist-get prompt :expiresAt)
                 (format " (before %s)" (plist-get prompt :expiresAt))
               ""))
    (when (and url (not noninteractive))
      (run-at-time 0 nil
                   (lambda ()
                     (when (y-or-n-p (format "Open %s in a browser? " url))
                       (funcall tokenrelay-browse-url-function url)))))))

;;;; Sessions

(defun tokenrelay-info (&optional timeout)
  "The initialize result (a plist), waiting up to TIMEOUT seconds."
  (tokenrelay--ensure)
  (let ((deadline (+ (float-time) (or timeout tokenrelay-timeout))))
    (while (and (not tokenrelay--info) (tokenrelay-running-p)
                (< (float-time) deadline))
      (accept-process-output tokenrelay--process
                             (max 0.001 (- deadline (float-time))))))
  tokenrelay--info)

(defun tokenrelay-status-result (&optional timeout)
  "The status result: (:sessions [...] :subscriptions N); no tokens.
Wait up to TIMEOUT seconds."
  (tokenrelay--call-sync 'status nil timeout))

(defun tokenrelay--names (&optional environment)
  "Environment names, or the profile names of ENVIRONMENT."
  (let ((envs (append (plist-get (tokenrelay-info 5) :environments) nil)))
    (if environment
        (mapcar (lambda (p) (plist-get p :name))
                (append (plist-get (cl-find environment envs
                                            :key (lambda (e) (plist-get e :name))
                                            :test #'equal)
                                   :profiles)
                        nil))
      (mapcar (lambda (e) (plist-get e :name)) envs))))

(defun tokenrelay--read-session ()
  "Read an environment and a profile (empty means the default)."
  (let* ((env (completing-read "Environment (empty: default): "
                               (tokenrelay--names)))
         (profile (completing-read "Profile (empty: default): "
                                   (and (not (string-empty-p env))
                                        (tokenrelay--names env)))))
    (list (unless (string-empty-p env) env)
          (unless (string-empty-p profile) profile))))

(defun tokenrelay--session-params (environment profile &optional all)
  "Params naming ENVIRONMENT and PROFILE (or ALL sessions)."
  (append (when environment (list :environment environment))
          (when profile (list :profile profile))
          (when all (list :all t))))

(defun tokenrelay-invalidate (&optional environment profile all)
  "Expire the access token of ENVIRONMENT/PROFILE (ALL: every session).
The next use renews it.  Return how many sessions were invalidated."
  (interactive (tokenrelay--read-session))
  (let ((n (plist-get (tokenrelay--call-sync
                       'token-invalidate
                       (tokenrelay--session-params environment profile all))
                      :invalidated)))
    (when (called-interactively-p 'interactive)
      (message "tokenrelay: %d session(s) invalidated" n))
    n))

(defun tokenrelay-logout (&optional environment profile all)
  "Drop the tokens of ENVIRONMENT/PROFILE (ALL: every session)."
  (interactive (tokenrelay--read-session))
  (prog1 (tokenrelay--call-sync
          'logout (tokenrelay--session-params environment profile all))
    (when (called-interactively-p 'interactive)
      (message "tokenrelay: logged out"))))

(defun tokenrelay-login (&optional environment profile callback)
  "Log in to ENVIRONMENT/PROFILE (an interactive profile).
While the login waits, each auth-prompt goes to
`tokenrelay-auth-prompt-function'.  CALLBACK is called with ERROR and
RESULT: nil and the result (:environment :profile :loggedIn
:expiresAt :subject...) once the session is stored, or an error plist
and nil.  Return the request id."
  (interactive (tokenrelay--read-session))
  (let ((done (or callback
                  (lambda (error result)
                    (if error (tokenrelay--report-error error)
                      (message "tokenrelay: logged in to %s/%s%s"
                               (plist-get result :environment)
                               (plist-get result :profile)
                               (if (plist-get result :subject)
                                   (format " as %s" (plist-get result :subject))
                                 "")))))))
    (tokenrelay--send 'login (tokenrelay--session-params environment profile)
                      (lambda (result) (funcall done nil result))
                      (lambda (error) (funcall done error nil)))))

;;;; Commands

(defun tokenrelay--pretty-json (value)
  "VALUE (as json-parse gives it) as indented JSON text."
  (with-temp-buffer
    (insert (json-serialize value :null-object nil :false-object :json-false))
    (json-pretty-print-buffer)
    (buffer-string)))

(defun tokenrelay--response-text (params response)
  "The text `tokenrelay-call' shows for RESPONSE to PARAMS."
  (let ((headers (plist-get response :headers))
        (lines nil))
    (push (format "%s %s -> %d  (%.0f ms)"
                  (or (plist-get params :method) "GET")
                  (or (plist-get params :path) (plist-get params :url))
                  (plist-get response :status)
                  (or (plist-get response :elapsedMs) 0))
          lines)
    (let (names)
      (cl-loop for (name _value) on headers by #'cddr
               do (push (substring (symbol-name name) 1) names))
      (dolist (name (sort names #'string<))
        (let ((value (plist-get headers (intern (concat ":" name)))))
          (if (vectorp value)
              (mapc (lambda (v) (push (format "%s: %s" name v) lines)) value)
            (push (format "%s: %s" name value) lines)))))
    (push "" lines)
    (cond ((plist-member response :json)
           (push (tokenrelay--pretty-json (plist-get response :json)) lines))
          ((plist-member response :text) (push (plist-get response :text) lines))
          ((plist-member response :base64)
           (push (format "(binary body, %d base64 characters)"
                         (length (plist-get response :base64)))
                 lines)))
    (concat (string-join (nreverse lines) "\n") "\n")))

(defun tokenrelay--show (name text)
  "Show TEXT in the buffer NAME (read-only); return the buffer."
  (let ((buffer (get-buffer-create name)))
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (erase-buffer)
        (insert text)
        (goto-char (point-min)))
      (special-mode))
    (display-buffer buffer)
    buffer))

(defun tokenrelay--parse-body (body)
  "BODY typed by the user: JSON when it starts with { or [, else text."
  (cond ((or (null body) (string-empty-p (string-trim body))) nil)
        ((string-match-p "\\`[ \t\n]*[[{]" body)
         (list :json (json-parse-string body :object-type 'hash-table
                                        :null-object nil
                                        :false-object :json-false)))
        (t (list :text body))))

(defun tokenrelay-call (method path &optional body environment profile)
  "Send METHOD PATH (with BODY) to ENVIRONMENT/PROFILE; show the response.
PATH is resolved against the environment's base URL (an absolute URL
is used as is).  BODY is JSON when it starts with { or [, else text.
The response goes to the *tokenrelay response* buffer, then
`tokenrelay-response-hook' runs there.  Return the request id."
  (interactive
   (list (completing-read "Method: " '("GET" "POST" "PUT" "PATCH" "DELETE"
                                       "HEAD" "OPTIONS")
                          nil nil nil nil "GET")
         (read-string "Path or URL: " "/")
         (read-string "Body (JSON or text, empty for none): ")))
  (let* ((started (float-time))
         (params (append (list :method (upcase method))
                         (if (string-match-p "\\`https?://" path)
                             (list :url path)
                           (list :path path))
                         (tokenrelay--parse-body body)
                         (tokenrelay--session-params environment profile)))
         (finish
          (lambda (response error)
            (let ((buffer (tokenrelay--show
                           "*tokenrelay response*"
                           (if error
                               (format "%s %s failed: %s (%s)\n" method path
                                       (plist-get error :message)
                                       (plist-get error :kind))
                             (tokenrelay--response-text params response)))))
              (setq tokenrelay-last-response
                    (list :params params :response response :error error
                          :ms (* 1000 (- (float-time) started))))
              (when error (tokenrelay--report-error error))
              (with-current-buffer buffer
                (run-hooks 'tokenrelay-response-hook))))))
    (tokenrelay-request params
                        :callback (lambda (r) (funcall finish r nil))
                        :error-callback (lambda (e) (funcall finish nil e)))))

(defvar-local tokenrelay--buffer-subscription nil
  "The subscription whose events this buffer shows.")

(defun tokenrelay--append (buffer text)
  "Append TEXT and a newline to BUFFER, if it is live."
  (when (buffer-live-p buffer)
    (with-current-buffer buffer
      (let ((inhibit-read-only t))
        (save-excursion
          (goto-char (point-max))
          (insert text "\n"))))))

(defun tokenrelay-events (path &optional environment profile)
  "Follow the event stream at PATH in a buffer; killing it unsubscribes.
ENVIRONMENT and PROFILE default to the config's.  Return the buffer."
  (interactive (list (read-string "Event stream path or URL: " "/")))
  (let* ((buffer (generate-new-buffer (format "*tokenrelay events %s*" path)))
         (params (append (if (string-match-p "\\`https?://" path)
                             (list :url path)
                           (list :path path))
                         (tokenrelay--session-params environment profile)))
         (sub (tokenrelay-subscribe
               params
               (lambda (event)
                 (tokenrelay--append
                  buffer (format "[%s] %s: %s" (or (plist-get event :id) "-")
                                 (plist-get event :event)
                                 (plist-get event :data))))
               :on-state
               (lambda (state)
                 (tokenrelay--append
                  buffer (format "-- %s%s" (plist-get state :state)
                                 (if (plist-get state :status)
                                     (format " %s" (plist-get state :status))
                                   ""))))
               :on-error
               (lambda (error)
                 (tokenrelay--append
                  buffer (format "subscribe failed: %s (%s)"
                                 (plist-get error :message)
                                 (plist-get error :kind)))))))
    (with-current-buffer buffer
      (special-mode)
      (setq tokenrelay--buffer-subscription sub)
      (add-hook 'kill-buffer-hook
                (lambda () (tokenrelay-unsubscribe sub)) nil t))
    (display-buffer buffer)
    buffer))

(defun tokenrelay-unsubscribe-all ()
  "Close every open subscription."
  (interactive)
  (mapc #'tokenrelay-unsubscribe (tokenrelay-subscriptions)))

;;;; The status buffer

(defvar tokenrelay-status-mode-map
  (let ((map (make-sparse-keymap)))
    (define-key map "i" #'tokenrelay-status-invalidate)
    (define-key map "L" #'tokenrelay-status-logout)
    (define-key map "l" #'tokenrelay-status-login)
    map)
  "Keys of `tokenrelay-status-mode'.")

(define-derived-mode tokenrelay-status-mode tabulated-list-mode
  "tokenrelay-status"
  "The sessions of tokenrelay.
\\<tokenrelay-status-mode-map>\\[revert-buffer] refreshes, \
\\[tokenrelay-status-invalidate] invalidates the session at point,
\\[tokenrelay-status-logout] logs it out, \\[tokenrelay-status-login] \
logs in."
  (setq tabulated-list-format
        [("Environment" 12 t) ("Profile" 12 t) ("Type" 19 t) ("State" 9 t)
         ("Expires" 21 t) ("Refresh" 7 t) ("Requests" 8 t)
         ("Last error" 0 nil)])
  (setq tabulated-list-sort-key '("Environment" . nil))
  (add-hook 'tabulated-list-revert-hook #'tokenrelay--status-refresh nil t)
  (tabulated-list-init-header))

(defun tokenrelay--status-entries (status)
  "Tabulated-list entries for STATUS."
  (mapcar (lambda (s)
            (let ((error (plist-get s :lastError)))
              (list (cons (plist-get s :environment) (plist-get s :profile))
                    (vector (plist-get s :environment) (plist-get s :profile)
                            (plist-get s :type) (plist-get s :state)
                            (or (plist-get s :expiresAt) "-")
                            (if (eq (plist-get s :refreshable) t) "yes" "no")
                            (format "%s" (or (plist-get (plist-get s :counters)
                                                        :requests)
                                             0))
                            (if error
                                (format "%s: %s" (plist-get error :kind)
                                        (plist-get error :message))
                              "")))))
          (append (plist-get status :sessions) nil)))

(defun tokenrelay--status-refresh ()
  "Fill the status buffer from a fresh status result."
  (setq tabulated-list-entries
        (tokenrelay--status-entries (tokenrelay-status-result))))

(defun tokenrelay-status ()
  "Show tokenrelay's sessions in a table; return the buffer."
  (interactive)
  (let ((buffer (get-buffer-create "*tokenrelay status*")))
    (with-current-buffer buffer
      (tokenrelay-status-mode)
      (tokenrelay--status-refresh)
      (tabulated-list-print))
    (display-buffer buffer)
    buffer))

(defun tokenrelay--status-at-point ()
  "The (ENVIRONMENT . PROFILE) of the line at point."
  (or (tabulated-list-get-id) (user-error "No session on this line")))

(defun tokenrelay-status-invalidate ()
  "Invalidate the session at point."
  (interactive)
  (let ((id (tokenrelay--status-at-point)))
    (tokenrelay-invalidate (car id) (cdr id))
    (revert-buffer)))

(defun tokenrelay-status-logout ()
  "Log out the session at point."
  (interactive)
  (let ((id (tokenrelay--status-at-point)))
    (tokenrelay-logout (car id) (cdr id))
    (revert-buffer)))

(defun tokenrelay-status-login ()
  "Log in the session at point."
  (interactive)
  (let ((id (tokenrelay--status-at-point)))
    (tokenrelay-login (car id) (cdr id))))

;;;; Mode line

(defun tokenrelay-mode-line ()
  "A short text for the mode line: \"\" when nothing runs."
  (if (not (tokenrelay-running-p))
      (if (and tokenrelay-last-exit-code (/= tokenrelay-last-exit-code 0))
          (format "tokenrelay exited (%d)" tokenrelay-last-exit-code)
        "")
    (concat "tokenrelay"
            (when (> tokenrelay--in-flight 0)
              (format " %d req" tokenrelay--in-flight))
            (let ((n (hash-table-count tokenrelay--subscriptions)))
              (when (> n 0) (format " %d sub" n)))
            (when (and tokenrelay-last-error
                       (not (equal (plist-get tokenrelay-last-error :kind)
                                   "cancelled")))
              (format " !%s" (plist-get tokenrelay-last-error :kind))))))

;;;; Lifecycle

(defun tokenrelay-show-log ()
  "Show what the process wrote to stderr (its log)."
  (interactive)
  (let ((buffer (and tokenrelay--connection
                     (jsonrpc-stderr-buffer tokenrelay--connection))))
    (if (buffer-live-p buffer) (display-buffer buffer)
      (message "tokenrelay: no log (not running)"))))

(defun tokenrelay-shutdown (&optional timeout)
  "Stop tokenrelay: shutdown, exit, then a signal; each bounded.
TIMEOUT (seconds, default 5) bounds the whole.  Return the exit code."
  (interactive)
  (let ((timeout (or timeout 5))
        (proc tokenrelay--process))
    (when (tokenrelay-running-p)
      (condition-case nil
          (tokenrelay--call-sync 'shutdown nil (/ timeout 2.0))
        (tokenrelay-error nil))
      (when (process-live-p proc)
        (jsonrpc-notify tokenrelay--connection 'exit (tokenrelay--object nil)))
      (let ((deadline (+ (float-time) (/ timeout 2.0))))
        (while (and (process-live-p proc) (< (float-time) deadline))
          (accept-process-output proc (max 0.001 (- deadline (float-time))))))
      (when (process-live-p proc)
        (signal-process proc 'term)
        (let ((deadline (+ (float-time) 1)))
          (while (and (process-live-p proc) (< (float-time) deadline))
            (accept-process-output proc 0.05))))
      (when (process-live-p proc)
        (delete-process proc))
      ;; Let the sentinel run (it records the exit code).
      (let ((deadline (+ (float-time) 1)))
        (while (and (not (process-get proc 'jsonrpc-sentinel-cleanup-started))
                    (< (float-time) deadline))
          (accept-process-output nil 0.01)))
      (setq tokenrelay-last-exit-code (process-exit-status proc)))
    (when (called-interactively-p 'interactive)
      (message "tokenrelay: stopped (exit %s)" tokenrelay-last-exit-code))
    tokenrelay-last-exit-code))

(defun tokenrelay-restart ()
  "Stop tokenrelay and start it again (e.g. after changing options)."
  (interactive)
  (tokenrelay-shutdown)
  (tokenrelay--start))

(defun tokenrelay--kill-emacs ()
  "Stop tokenrelay when Emacs exits."
  (when (tokenrelay-running-p)
    (ignore-errors (tokenrelay-shutdown 2))))

(provide 'tokenrelay)
;;; tokenrelay.el ends here
