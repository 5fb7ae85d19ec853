"""The Lesson tab's words (eagle_app/lesson.py), every one in English and Chinese: the tab's labels, and per step
its title, caption, question, try-it and the rule that picked its cycle. Every figure about this project is a
{field} the tab fills from a record at render time (tests/test_literal_figures.py checks none is typed); a field
no record filled shows as "—". Chinese bold is <b>, not ** (Markdown does not close ** beside CJK punctuation)."""
from viz.i18n import Strings

TEXT = Strings({
    "tab": ("Lesson", "课堂"),
    "prev": ("◀ Previous step", "◀ 上一步"),
    "next": ("Next step ▶", "下一步 ▶"),
    "open": ("Open this step's recorded run in the Decode tab (scrub its cycles)",
             "在“解码”页打开这一步的记录（可逐轮拖动）"),
    "live": ("Go live: the Decode tab with this step's prompt and the lesson's settings",
             "进入实时演示：“解码”页，带上这一步的提示词和课堂的设置"),
    "steps": ("Step", "步骤"),
    "intro": ("Eight steps, one idea each, from why checking guesses is cheap to the live model. Read the caption "
              "aloud, ask the question (the figure answers it), then try it on the Decode tab.",
              "八个步骤，每步讲一个概念：从“为什么检查猜测很便宜”一直讲到实时运行的模型。朗读说明，提出问题（答案就在图中），"
              "然后到“解码”页动手试一试。"),
    "head": ("### Step {i} of {n} · {title}", "### 第 {i} 步（共 {n} 步）· {title}"),
    "ask": ("**Question for the class:** {q}", "<b>问全班</b>：{q}"),
    "try": ("**Try it** (Decode tab, press Generate): {t}", "<b>试一试</b>（“解码”页，点击“生成”）：{t}"),
    "source": ("Trace: “{prompt}” · cycle {k} of {of} · chosen as: {rule}",
               "轨迹：“{prompt}” · 第 {k} 轮（共 {of} 轮）· 选取规则：{rule}"),
    "source_record": ("Figures from: {what}", "数据来源：{what}"),
    "missing": ("This step's run is not recorded yet for the lesson's settings: record the lesson's traces again "
                "(`docs/app.md`, *The lesson*). The caption's numbers appear once it is.",
                "这一步在课堂的设置下还没有运行记录：请重新录制课堂轨迹（见 `docs/app.md` 的 *The lesson*）。录制后说明中的数字才会出现。"),
    "opened": ("Lesson step {i}: {title} · cycle {k} of {of}", "课堂第 {i} 步：{title} · 第 {k} 轮（共 {of} 轮）"),
    "went_live": ("Lesson step {i}: the live Decode tab with the lesson's settings. Press Generate.",
                  "课堂第 {i} 步：实时的“解码”页，已带上课堂的设置。请点击“生成”。"),
    "list_sep": ("”, “", "”、“"),
    "none": ("—", "—"),
    "depth_of": ("depth {d}: {a} of {b}", "深度 {d}：{b} 次中 {a} 次"),
    "live_model": ("as the loaded model computed them just now", "这是已加载的模型刚刚算出的数值"),
    "no_model": ("as a sketch: no model is loaded yet (open the Decode tab, then come back)",
                 "这里只是示意图：模型尚未加载（先打开“解码”页，再回来）"),
    "recorded_hw": ("the hardware panel's recording ({machine}, {date}, `{command}`)",
                    "硬件面板的记录（{machine}，{date}，`{command}`）"),
    "source_live": ("Figures from: the loaded model, run on “{prompt}” when this step is shown; EAGLE-3's layers: "
                    "its head's config.json", "数据来源：显示这一步时，已加载的模型对“{prompt}”的运行；EAGLE-3 的层：其草稿头的 config.json"),
    "rule.tree": ("the first cycle with a full tree", "第一个用满草稿树的轮次"),
    "rule.mask": ("the first full tree that accepted two or more drafts", "第一个用满草稿树且接受了至少两个草稿的轮次"),
    "rule.greedy": ("the longest accepted path", "接受路径最长的轮次"),
    "rule.sampling": ("the first cycle that accepted a draft after a rejected sibling, its threshold visibly above its p",
                      "第一个在兄弟节点被拒绝后接受草稿、且门槛明显高于其 p 的轮次"),
    "rule.languages": ("the first cycle whose accepted path holds a byte token", "第一个接受路径中含有字节词元的轮次"),
    "per_char": ("{n} take {k} token(s)", "{n} 个占 {k} 个词元"),
    # step 8's precision switch (lesson_cards.precision_text): the two weight formats, read from the hardware record
    "prec.label": ("Precision of the target's weights", "目标模型权重的精度"),
    "prec.shown": ("**{name}**: t(1) = {t1} ms, t({k}) = {tk} ms, {r}× t(1). Best tree from the same τ table: "
                   "{best} ({speedup}× predicted).",
                   "<b>{name}</b>：t(1) = {t1} 毫秒，t({k}) = {tk} 毫秒，是 t(1) 的 {r} 倍。用同一张 τ 表预测的最佳树："
                   "{best}（预测 {speedup}×）。"),
    "prec.steeper": ("From one row to {k} rows, t(k) grows {g_r}× in {g_name}, against {f_name}'s {f_r}×: a pass that "
                     "reads less is priced by its rows' arithmetic, so the machine turns from memory-bound toward "
                     "compute-bound.",
                     "从一行到 {k} 行，t(k) 增长 {g_r} 倍（{g_name}），而 {f_name} 是 {f_r} 倍：一次前向读得更少，代价就由各行的"
                     "算术决定，机器从受内存带宽限制转向受计算限制。"),
    "prec.flatter": ("From one row to {k} rows, t(k) grows {g_r}× in {g_name}, against {f_name}'s {f_r}×: on this "
                     "record the blocks' curve is no steeper.",
                     "从一行到 {k} 行，t(k) 增长 {g_r} 倍（{g_name}），而 {f_name} 是 {f_r} 倍：在这份记录中，权重块的曲线并不更陡。"),
    "prec.smaller": ("So the best tree moves smaller: {f_best} in {f_name}, {g_best} in {g_name} ({g_speedup}× predicted).",
                     "所以最佳的树变小：{f_best}（{f_name}）→ {g_best}（{g_name}，预测 {g_speedup}×）。"),
    "prec.larger": ("Here the best tree moves larger: {f_best} in {f_name}, {g_best} in {g_name} ({g_speedup}× predicted).",
                    "这里最佳的树反而变大：{f_best}（{f_name}）→ {g_best}（{g_name}，预测 {g_speedup}×）。"),
    "prec.same": ("The best tree keeps its size: {f_best} in {f_name}, {g_best} in {g_name} ({g_speedup}× predicted).",
                  "最佳的树大小不变：{f_best}（{f_name}），{g_best}（{g_name}，预测 {g_speedup}×）。"),
    "prec.decode": ("The same prompt, “{prompt}”, {n} tokens decoded: {f_name} vanilla {f_van} and EAGLE {f_eagle} "
                    "tokens/s (τ {f_tau}); {g_name} vanilla {g_van} and EAGLE {g_eagle} tokens/s (τ {g_tau}). The two "
                    "formats' vanilla texts agree on their first {same} tokens.",
                    "同一个提示词“{prompt}”，解码 {n} 个词元：{f_name} 普通解码 {f_van}、EAGLE {f_eagle} 词元/秒（τ {f_tau}）；"
                    "{g_name} 普通解码 {g_van}、EAGLE {g_eagle} 词元/秒（τ {g_tau}）。两种格式的普通解码文本前 {same} 个词元相同。"),
    "prec.missing": ("**{name}**: not recorded yet: this record holds {f_name} only. Recording it (its t(k), its best "
                     "tree, the same prompt decoded) takes a quiet machine and `{command}`.",
                     "<b>{name}</b>：尚未记录：这份记录只有 {f_name}。要记录它（t(k)、最佳树、同一提示词的解码），需要一台安静的"
                     "机器并运行 `{command}`。"),
    "prec.measure": ("Measure both formats on this machine", "在本机测量两种格式"),
    "prec.waiting": ("Waiting for the decoder: a run is in progress…", "正在等待解码器：有一次运行正在进行……"),
    "prec.no_model": ("No model: {error}", "没有模型：{error}"),
    "prec.failed": ("The measurement failed: {error}. Shown: the record.", "测量失败：{error}。当前显示的是记录。"),
    "prec.here": ("**Measured here:** {machine}, {threads} thread(s), {seconds} s (t(k) and the head's steps; no decode).",
                  "<b>本机实测：</b>{machine}，{threads} 个线程，用时 {seconds} 秒（只测 t(k) 与草稿头的步，不解码）。"),
    "prec.unavailable": ("**{name}**: not available: it could not run where these figures were taken ({why}).",
                         "<b>{name}</b>：无法使用：测得这些数据的机器上不能运行它（{why}）。"),

    # 1 ------------------------------------------------------------------------------------------------
    "title.cost": ("Why one pass over k tokens costs about one", "为什么 k 个词元的一次前向只花约一次的代价"),
    "cap.cost": ("To write one token the target reads every one of its weights from memory: {mb} MB a pass on this "
                 "machine. A pass over k tokens reads the same weights once and only adds arithmetic. Measured on "
                 "{machine} ({date}): t(1) = {t1} ms, and a pass over the {rows} rows of the page's tree takes "
                 "t({rows}) = {tk} ms, {r}× one token's pass, not {rows}×. So the target can check a whole tree of "
                 "guesses for about the price of one step. That is why speculative decoding works: guessing is cheap "
                 "to check.",
                 "目标模型每写一个词元，都要把全部权重从内存中读一遍：在这台机器上每次前向读 {mb} MB。对 k 个词元的一次前向"
                 "只读同样的权重一遍，多出来的只是算术运算。在 {machine} 上实测（{date}）：t(1) = {t1} 毫秒，而读页面默认树的 "
                 "{rows} 行的一次前向 t({rows}) = {tk} 毫秒，是一个词元的 {r} 倍，而不是 {rows} 倍。所以目标模型检查整棵"
                 "树的猜测，只花约一步的代价。这就是投机解码有效的原因：猜测检查起来很便宜。"),
    "q.cost": ("If a pass over {rows} tokens cost {rows} times t(1), could checking guesses ever pay?",
               "如果 {rows} 个词元的一次前向要花 {rows} 倍的 t(1)，检查猜测还可能划算吗？"),
    "try.cost": ("set **{control}** from {n} to {n2}. Predict: the verify time per cycle hardly falls: "
                 "t({k2}) = {tk2} ms against t({rows}) = {tk} ms recorded.",
                 "把<b>{control}</b>从 {n} 改为 {n2}。预测：每轮的验证时间几乎不降：记录中 t({k2}) = {tk2} 毫秒，"
                 "t({rows}) = {tk} 毫秒。"),

    # 2 ------------------------------------------------------------------------------------------------
    "title.head": ("What EAGLE's head reads", "EAGLE 的草稿头读什么"),
    "cap.head": ("EAGLE's draft head does not guess from tokens alone. At each position t it reads the target's "
                 "top feature f(t), the vector the target's LM head reads (the EAGLE paper's “second-to-top layer”), "
                 "together with the token one step ahead, x(t+1): the token sequence shifted by one. The feature "
                 "carries what the target computed; the shifted token says which token was actually chosen from it. "
                 "The figure shows these inputs for this step's prompt, {live}. An EAGLE-3 head reads three of the "
                 "target's layers instead (low, middle, high: the inputs of layers {layers}), fused into one vector.",
                 "EAGLE 的草稿头并不只靠词元来猜。在每个位置 t，它读取目标模型的顶层特征 f(t)，也就是目标模型的 LM head "
                 "读取的那个向量（EAGLE 论文称之为“倒数第二层”），再加上后一位的词元 x(t+1)：词元序列错开一位。特征携带目标"
                 "模型算出的内容；错开的词元说明从中实际选出了哪个词元。图中是这一步提示词的这些输入，{live}。EAGLE-3 的头则读取"
                 "目标模型的三层（低、中、高：第 {layers} 层的输入），融合成一个向量。"),
    "q.head": ("Why does the head need x(t+1) when f(t) already holds the whole context?",
               "f(t) 已经包含了整个上下文，为什么草稿头还需要 x(t+1)？"),
    "try.head": ("set **{control}** to EAGLE-3 (three layers). Predict: the text stays identical to vanilla's; only "
                 "τ and the speed change, because only the guesses change.",
                 "把<b>{control}</b>改为 EAGLE-3（读三层）。预测：文本仍与普通解码完全相同；只有 τ 和速度会变，因为变的只是猜测。"),

    # 3 ------------------------------------------------------------------------------------------------
    "title.tree": ("The draft tree, and its root row", "草稿树，以及根节点那一行"),
    "cap.tree": ("Before the target runs, the head guesses a tree. Its root is the token the target chose last "
                 "(“{root}”), which the target has not read yet. The head tried {kids} first tokens, then kept "
                 "guessing after the likeliest ones, {depth} levels deep: {n} drafts. The target reads {rows} rows: "
                 "the {n} drafts plus the root, because the root's row is where the target says what comes after it, "
                 "the test of every first draft and the bonus if all fail. k drafts, k + 1 rows. This is the page's "
                 "`{preset}` tree ({tree}).",
                 "在目标模型运行之前，草稿头先猜出一棵树。树根是目标模型上一步选定的词元（“{root}”），目标模型还没有读过它。"
                 "草稿头试了 {kids} 个第一个词元，再沿最可能的几条继续猜，共 {depth} 层：{n} 个草稿。目标模型读取 {rows} 行："
                 "{n} 个草稿加上树根，因为树根那一行给出目标模型认为它后面该接什么，用来检验每个第一层草稿，全部失败时也由它给出"
                 "奖励词元。k 个草稿，k + 1 行。这是页面默认的 `{preset}` 树（{tree}）。"),
    "q.tree": ("How many rows does the target read for this tree, and why one more than the drafts?",
               "这棵树目标模型要读几行？为什么比草稿多一行？"),
    "try.tree": ("set **{control}** to 1. Predict: one level of at most {width} drafts, so a cycle commits at most "
                 "two tokens (one draft and the bonus).",
                 "把<b>{control}</b>改为 1。预测：只剩一层，最多 {width} 个草稿，所以每轮最多提交两个词元（一个草稿加奖励词元）。"),

    # 4 ------------------------------------------------------------------------------------------------
    "title.mask": ("The tree-attention mask: one pass", "树注意力掩码：一次前向"),
    "cap.mask": ("The target checks all {rows} rows in one forward pass, reading them as one sequence. The mask "
                 "shows how: each row sees the committed text and its own ancestors (the filled squares), never "
                 "another branch, and sits at position context + depth. So every branch is scored as if it were "
                 "alone, all at once. In this cycle that single pass confirmed {k} drafts and gave the target's own "
                 "next token: {m} tokens for one pass.",
                 "目标模型在一次前向中检查全部 {rows} 行，把它们当作一个序列来读。掩码图展示了做法：每一行能看到已提交的文本"
                 "和它自己的祖先（涂色的格子），看不到其他分支，位置是 上下文长度 + 深度。因此每个分支都像单独存在一样被打分，"
                 "而且是同时进行。这一轮，这一次前向确认了 {k} 个草稿，并给出目标模型自己的下一个词元：一次前向得到 {m} 个词元。"),
    "q.mask": ("In the mask, which rows can the row of “{token}” see? Why must it not see the other branches?",
               "在掩码图中，“{token}”这一行能看到哪些行？为什么它不能看到其他分支？"),
    "try.mask": ("set **{control}** to 1. Predict: the tree becomes a chain and the mask a full triangle: every "
                 "row sees every row above it.",
                 "把<b>{control}</b>改为 1。预测：树变成一条链，掩码变成完整的三角形：每一行都能看到它上面的所有行。"),

    # 5 ------------------------------------------------------------------------------------------------
    "title.greedy": ("Greedy acceptance and the bonus token", "贪心接受与奖励词元"),
    "cap.greedy": ("At temperature 0 a draft is kept only if it is exactly the target's top token at its parent's "
                   "row. Walking down from the root, the target accepted {k} drafts in a row: “{quoted}”. The same "
                   "pass gave the target's own choice after the last of them, the bonus token “{bonus}”: every "
                   "cycle adds at least one token, this one {m}. Acceptance per depth over this run: {per_depth}. "
                   "The text is vanilla's, token for token.",
                   "温度为 0 时，只有恰好等于目标模型在其父节点那一行的首选词元的草稿才会被保留。从根往下，目标模型连续接受了 "
                   "{k} 个草稿：“{quoted}”。同一次前向还给出了目标模型在最后一个之后自己的选择，即奖励词元“{bonus}”：每一轮"
                   "至少增加一个词元，这一轮增加了 {m} 个。这次运行中每个深度的接受情况：{per_depth}。文本与普通解码逐词元相同。"),
    "q.greedy": ("In the chart, how high is the target's p for each accepted draft? Which bar is the bonus token?",
                 "在图中，每个被接受草稿的目标概率 p 有多高？哪一根柱子是奖励词元？"),
    "try.greedy": ("set **{control}** to vanilla. Predict: the same text, one token per pass (τ of one), and fewer "
                   "tokens per second.",
                   "把<b>{control}</b>改为普通解码。预测：文本相同，每次前向一个词元（τ 为一），每秒词元数更少。"),

    # 6 ------------------------------------------------------------------------------------------------
    "title.sampling": ("Sampling: the test, a rejection, the residual", "采样：检验、拒绝与剩余分布"),
    "cap.sampling": ("At temperature {t} the target samples, and drafts must not change the odds. Here drafts are the "
                     "head's top picks, not samples, so the verifier's test uses p alone: draw u uniform in [0, 1) "
                     "and keep child c if u < p(c) ÷ (1 − p of its rejected elder siblings). “{rej}” lost its draw "
                     "(u = {u1}, p = {p1}). Its sibling “{acc}” was then tested against the residual, p without "
                     "“{rej}”, renormalised: p = {p2} became {t2}, and u = {u2} kept it. If every child loses, the "
                     "bonus is drawn from that residual. The text keeps the target's own distribution.",
                     "温度为 {t} 时目标模型会采样，草稿不能改变其中的概率。这里的草稿是草稿头的首选，而不是采样所得，所以验证器的"
                     "检验只用 p：抽取 [0, 1) 上均匀的 u，当 u < p(c) ÷ (1 − 已被拒绝的兄长节点的 p) 时保留子节点 c。"
                     "“{rej}”没有通过（u = {u1}，p = {p1}）。接着它的兄弟“{acc}”按剩余分布检验，即去掉“{rej}”后重新归一化的 "
                     "p：p = {p2} 变成 {t2}，u = {u2}，于是保留。如果所有子节点都失败，奖励词元从这个剩余分布中抽取。"
                     "文本仍服从目标模型自己的分布。"),
    "q.sampling": ("In the chart, is the black threshold line of “{acc}” above or below its p bar, and why?",
                   "在图中，“{acc}”的黑色门槛线在它的 p 柱之上还是之下？为什么？"),
    "try.sampling": ("change **{control}**. Predict: another text, just as likely as vanilla sampling's: over many "
                     "seeds each word appears as often as without drafts.",
                     "换一个<b>{control}</b>。预测：得到另一段文本，其可能性与普通采样完全相同：换很多个种子，每个词出现的频率"
                     "与不用草稿时一样。"),

    # 7 ------------------------------------------------------------------------------------------------
    "title.languages": ("Languages: acceptance and bytes", "语言：接受率与字节"),
    "cap.languages": ("The same questions in English and Chinese give different τ (figure: the shipped head, "
                      "{n_prompts} prompts a set). SmolLM2's tokenizer is a byte-level BPE: a Chinese character is "
                      "three UTF-8 bytes, and a token holds one, two or three of them. Of {chars} characters in the "
                      "Chinese prompts, {per_char}; only {whole} of the {vocab} tokens are whole characters. Here the "
                      "target accepted {k} byte tokens: “{quoted}”. Plainly: this small model, trained mostly on "
                      "English, writes poor Chinese (read the text below). The checks are the same, so the output is "
                      "still exactly the model's own.",
                      "同样的问题用英文和中文提问，τ 不同（图：随附的草稿头，每组 {n_prompts} 个提示词）。SmolLM2 的分词器是字节级 "
                      "BPE：一个汉字是三个 UTF-8 字节，一个词元含其中的一个、两个或三个。在中文提示词的 {chars} 个汉字中，{per_char}；"
                      "{vocab} 个词元中只有 {whole} 个是完整的汉字。这里目标模型接受了 {k} 个字节词元：“{quoted}”。坦白说：这个"
                      "主要用英文训练的小模型写出的中文很差（看下面的文本）。检验方式完全一样，所以输出仍然严格是模型自己的。"),
    "q.languages": ("Why can τ be higher in Chinese while a character costs up to three tokens?",
                    "一个汉字最多要三个词元，为什么中文的 τ 反而可能更高？"),
    "try.languages": ("replace the **{control}** with “{english}”. Predict: far fewer tokens for the same length of "
                      "answer, better text, and a τ near the figure's English bar.",
                      "把<b>{control}</b>换成 “{english}”。预测：同样长度的回答所需词元少得多，文本更好，τ 接近图中英文的柱子。"),

    # 8 ------------------------------------------------------------------------------------------------
    "title.hardware": ("Hardware: where the best tree moves", "硬件：最佳的树在哪里"),
    "cap.hardware": ("A bigger tree raises τ, the tokens a cycle commits, but a cycle then costs more: a pass over "
                     "more rows plus more drafting steps, c vanilla steps in all. The speedup is τ ÷ c. From the "
                     "recording on {machine} ({date}) the best tree here is {best} ({best_speedup}× predicted); the "
                     "page's `{preset}` tree {cpu_tree} predicts {cpu_speedup}×, and the published GPU tree {gpu_tree} "
                     "only {gpu_speedup}×: its {gpu_rows} rows cost c = {gpu_c} while τ reaches only {gpu_tau}. On a "
                     "GPU a pass of dozens of rows costs about one, so the best tree moves to the large end.",
                     "更大的树能提高 τ（每轮提交的词元数），但每轮的代价也更高：更多行的一次前向，加上更多起草步，共 c 个普通解码步。"
                     "加速比是 τ ÷ c。根据 {machine} 上的记录（{date}），本机最佳的树是 {best}（预测 {best_speedup}×）；页面默认的 "
                     "`{preset}` 树 {cpu_tree} 预测 {cpu_speedup}×，而论文中的 GPU 树 {gpu_tree} 只有 {gpu_speedup}×：它的 "
                     "{gpu_rows} 行花费 c = {gpu_c}，τ 却只到 {gpu_tau}。在 GPU 上几十行的一次前向与一行的代价相近，所以最佳的树"
                     "移到大的一端。"),
    "q.hardware": ("In the figure, where does this machine's curve peak, and where the GPU illustration's? Why?",
                   "在图中，本机的曲线和 GPU 示意的曲线各在哪里达到最高？为什么？"),
    "try.hardware": ("set **{control}** to `gpu`. Predict: the speedup falls toward the record's {gpu_speedup}×, "
                     "below the `{preset}` tree's {cpu_speedup}×. Then set it back: that is the live page.",
                     "把<b>{control}</b>改为 `gpu`。预测：加速比降向记录中的 {gpu_speedup}×，低于 `{preset}` 树的 {cpu_speedup}×。"
                     "再改回来：这就是实时的页面。"),
})
