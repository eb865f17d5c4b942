// tokenrelay for VS Code: the commands, adapted to the `vscode` API. The logic is in
// lib/controller.js (tested with node's test runner); this file only wires it to the editor.
'use strict';

const vscode = require('vscode');
const { Controller } = require('./lib/controller.js');

/** @type {Controller|null} */
let controller = null;

/** @param {vscode.ExtensionContext} context */
function activate(context) {
  const output = vscode.window.createOutputChannel('tokenrelay');
  const statusBar = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left);
  statusBar.command = 'tokenrelay.status';
  const refreshStatusBar = () => {
    const text = controller ? controller.statusText() : '';
    statusBar.text = text;
    if (text) statusBar.show(); else statusBar.hide();
  };
  context.subscriptions.push(output, statusBar);

  controller = new Controller({
    settings: () => {
      const c = vscode.workspace.getConfiguration('tokenrelay');
      return {
        binary: c.get('binary'),
        config: c.get('config'),
        environment: c.get('environment'),
        logLevel: c.get('logLevel'),
        env: c.get('env'),
      };
    },
    ui: {
      info: (message) => { vscode.window.showInformationMessage(message); },
      error: (message) => { vscode.window.showErrorMessage(message); },
      showDocument: async (text) => {
        const document = await vscode.workspace.openTextDocument({ content: text, language: 'http' });
        await vscode.window.showTextDocument(document, { preview: true });
      },
      output,
      openExternal: (url) => vscode.env.openExternal(vscode.Uri.parse(url)),
      pick: (items, placeholder) => vscode.window.showQuickPick(items, { placeHolder: placeholder }),
    },
  });
  const c = controller;

  /** @param {string} name @param {(...args: any[]) => Promise<unknown>} run */
  const command = (name, run) => {
    context.subscriptions.push(vscode.commands.registerCommand(name, async (...args) => {
      const pending = run(...args);
      refreshStatusBar();
      try { await pending; } catch (e) { output.appendLine(`${name}: ${/** @type {Error} */ (e).message}`); } finally { refreshStatusBar(); }
    }));
  };
  const pickSession = async () => {
    const sessions = [];
    for (const e of await c.environments()) for (const p of e.profiles ?? []) sessions.push(`${e.name}/${p.name}`);
    const choice = await vscode.window.showQuickPick(sessions, { placeHolder: 'environment/profile' });
    if (!choice) return undefined;
    const [environment, profile] = choice.split('/');
    return { environment, profile };
  };

  command('tokenrelay.request', async (input) => {
    const line = input ?? await vscode.window.showInputBox({ prompt: 'tokenrelay request', placeHolder: 'GET /path [--env=E] [--profile=P] [BODY]' });
    if (line) await c.request(line);
  });
  command('tokenrelay.status', () => c.status());
  command('tokenrelay.subscribe', async (input) => {
    const line = input ?? await vscode.window.showInputBox({ prompt: 'tokenrelay subscribe (events go to the output channel)', placeHolder: '/events [--env=E] [--profile=P]' });
    if (line) await c.subscribe(line);
  });
  command('tokenrelay.unsubscribe', async () => { c.ui.info(`tokenrelay: ${await c.unsubscribeAll()} subscription(s) closed`); });
  command('tokenrelay.login', async () => { const s = await pickSession(); if (s) await c.login(s); });
  command('tokenrelay.invalidate', async () => { const s = await pickSession(); if (s) await c.invalidate(s); });
  command('tokenrelay.showLog', async () => { for (const line of c.log) output.appendLine(line); output.show(); });
  command('tokenrelay.restart', async () => { await c.dispose(); await c.relay(); });
}

/** Stops the process when VS Code unloads the extension. */
async function deactivate() {
  if (controller) await controller.dispose();
  controller = null;
}

module.exports = { activate, deactivate };
